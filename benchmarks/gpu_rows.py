"""The rows of benchmarks/gpu_run.py: what each trains, what it is called, and what it costs.

A row is one train step setting of a Llama-shaped LM (benchmarks/llama_shapes.py) on one GPU, 8
rows of 2,048 tokens, bf16, AdamW: the model (125M or 1B), the attention kernel (XLA's or
cuDNN's), `model.remat`, `data.packing` and the GPU XLA flags (`seqjax.gpu_flags`).

Its name spells each setting where it differs from the first measurement's (remat full, rows not
packed, no GPU flags: gpu_run.py called neither the flags nor another policy then), so the four
rows measured then keep their names and their meaning: "1B/cudnn" is 1B under cuDNN, remat full,
unpacked, no flags; "1B/cudnn/remat=auto/packed/flags=on" is the same model as `seqjax train`
runs it by default on packed rows.

The rows measured since drop two settings of the first measurement that cost time without
belonging to the job: dropout (the config's default 0.1; Llama is pretrained, and MaxText runs
it, without) and the scanned stack, whose loop copies every layer's saved activations into
stacked buffers it first fills with zeros (at 125M on an H200, by the estimate: 38.0 ms a step
scanned, 30.2 ms unrolled, both without dropout; dropout costs 2 ms more). They are spelled
"no-dropout" and "unrolled"; the scanned stack stays as a variation of each baseline.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from llama_shapes import LLAMA, MODELS

ROWS_PER_DEVICE = 8
KERNELS = ("xla", "cudnn")
REMATS = ("auto", "none", "dots", "full")
# The settings a packed row adds to its config.
PACKED = ("data.packing=true", "data.max_segments=32")

# Seconds a row costs on an H200, from the first measurement (JAX 0.11.2, remat full, no flags):
START = 10  # a process of its own: Python, seqjax and JAX imported, the CUDA backend started
COMPILE = {("125M", "cudnn"): 12, ("1B", "cudnn"): 14, ("125M", "xla"): 57, ("1B", "xla"): 63}
STEP = {("125M", "cudnn"): 0.052, ("1B", "cudnn"): 0.357, ("125M", "xla"): 0.110, ("1B", "xla"): 0.504}
# An unrolled stack compiles its layers one by one: about twice the scanned stack's compile (the
# train step compiled for an H200 on a CPU: 57 s against 28 s at 125M).
UNROLLED_COMPILE = 2.0
INIT = {"125M": 3, "1B": 6}  # parameters and AdamW's state made on the device (a compile of its own)
TRACE = 8  # the profiler started and stopped around the traced steps, its trace written and read
WARM_STEPS, TIMED_STEPS, TRACED_STEPS = 3, 8, 2


@dataclasses.dataclass(frozen=True)
class Row:
    """One measured setting; `name` is its key in the results and in calibration.json."""

    model: str
    kernel: str
    remat: str = "full"
    packed: bool = False
    flags: bool = False
    scanned: bool = True
    dropout: bool = True

    @property
    def name(self) -> str:
        parts = [self.model, self.kernel]
        parts += [f"remat={self.remat}"] if self.remat != "full" else []
        parts += [] if self.scanned else ["unrolled"]
        parts += [] if self.dropout else ["no-dropout"]
        parts += ["packed"] if self.packed else []
        parts += ["flags=on"] if self.flags else []
        return "/".join(parts)

    def overrides(self) -> list[str]:
        """The row's `--set` overrides of `seqjax.config.Config`, in order (a later one wins)."""
        layout = ["train.sharding=data", f"train.batch_size={ROWS_PER_DEVICE}", f"model.attention_kernel={self.kernel}"]
        packing = list(PACKED) if self.packed else []
        stack = [] if self.scanned else ["model.scan_layers=false"]
        stack += [] if self.dropout else ["model.dropout=0.0"]
        return [*LLAMA, *MODELS[self.model][0], *layout, f"model.remat={self.remat}", *stack, *packing]

    @property
    def vocab(self) -> int:
        return MODELS[self.model][1]

    def estimate_seconds(self) -> float:
        """The row's wall time on an H200: a process started, the step compiled, the state made,
        the warm, timed and traced steps (each as long as the first measurement's step, remat
        full: no remat is quicker) and the trace. A packed row is costed as its kernel (cuDNN's
        packed layout on a Hopper GPU; on XLA, were it to fall back, about 45 s longer)."""
        key = (self.model, self.kernel)
        steps = (WARM_STEPS + TIMED_STEPS + TRACED_STEPS) * STEP[key]
        compile_seconds = COMPILE[key] * (1 if self.scanned else UNROLLED_COMPILE)
        return START + compile_seconds + INIT[self.model] + steps + TRACE


# A name's parts that switch a setting from the first measurement's: (the Row field, its value).
SWITCHES = {
    "unrolled": ("scanned", False),
    "no-dropout": ("dropout", False),
    "packed": ("packed", True),
    "flags=on": ("flags", True),
}


def parse(name: str) -> Row:
    """The row named `name` (as `Row.name` writes it).

    Raises:
      ValueError: an unknown model, kernel, policy or part.
    """
    model, _, rest = name.partition("/")
    kernel, _, rest = rest.partition("/")
    if model not in ("125M", "1B") or kernel not in KERNELS:
        raise ValueError(
            f"a gpu_run row starts with a model (125M, 1B) and a kernel ({', '.join(KERNELS)}), got {name!r}"
        )
    settings: dict[str, Any] = {}
    for part in rest.split("/") if rest else []:
        if part.startswith("remat=") and part[6:] in REMATS:
            settings["remat"] = part[6:]
        elif part in SWITCHES:
            field, value = SWITCHES[part]
            settings[field] = value
        else:
            raise ValueError(f"row {name!r}: {part!r} is none of remat=<{'|'.join(REMATS)}>, {', '.join(SWITCHES)}")
    row = Row(model, kernel, **settings)
    if row.name != name:
        raise ValueError(f"row {name!r} is written {row.name!r}")
    return row


# The run `seqjax train` makes of each model as Llama is pretrained: what the targets are held against.
BASELINE = {
    model: Row(model, "cudnn", remat="auto", flags=True, scanned=False, dropout=False) for model in ("125M", "1B")
}
# The first measurement (JAX 0.11.2 at 058d290): both kernels, remat full, unpacked, no flags.
FIRST = [Row(model, kernel) for model in ("125M", "1B") for kernel in ("xla", "cudnn")]


def plan() -> list[Row]:
    """The rows `measure` runs, most valuable first, so that a run cut short keeps the rows that
    matter: the baselines (`seqjax train` on cuDNN, remat auto, unpacked, flags on, unrolled, no
    dropout), then one setting changed at a time — packed rows, remat full, the flags off — each
    for 1B (where the step is long enough for a setting to show), then 125M; last the scanned
    stack. XLA's attention is left out (79 s at 125M, 95 s at 1B: no slack would be left); the
    first measurement has both models under it, and its 125M row's 5,000 launches a step are
    where the estimate's launch cost shows."""
    variations: list[dict[str, Any]] = [{}, {"packed": True}, {"remat": "full"}, {"flags": False}, {"scanned": True}]
    baselines = [BASELINE[model] for model in ("1B", "125M")]
    return [dataclasses.replace(row, **changes) for changes in variations for row in baselines]


PROBE_SECONDS = START + 5  # the bf16 matmul rate, measured in a process of its own first
BUDGET_SECONDS = 540  # the whole `measure`: 9 minutes of a lent GPU's 12-15, its start-up included


def planned_seconds(rows: list[Row]) -> float:
    """The time `measure` is expected to take for `rows`, the matmul probe included."""
    return PROBE_SECONDS + sum(row.estimate_seconds() for row in rows)
