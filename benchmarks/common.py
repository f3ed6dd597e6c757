"""Shared benchmark plumbing: machine/version record, matmul peak, interleaved timing, tables."""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.config import HeadConfig, ModelConfig, OptimConfig
from seqjax.contracts import Batch
from seqjax.heads import build_head
from seqjax.models import build_model
from seqjax.objectives import TeacherForcing
from seqjax.optimizers import learning_rate_schedule, make_optimizer
from seqjax.training.core.layout import make_mesh
from seqjax.training.core.mfu import matmul_tflops
from seqjax.training.core.state import TrainState, init_state
from seqjax.training.core.steps import TrainStep, make_train_step

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# The blocks of Llama as ModelConfig fields: rotary positions, RMSNorm, SwiGLU, no biases (kv_heads is each model's).
LLAMA_BLOCKS: dict[str, Any] = dict(positions="rope", norm_type="rmsnorm", mlp="swiglu", bias=False)


def torch_or_none() -> ModuleType | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 1)
    module: ModuleType = torch  # untyped here (no stubs): the module as a module
    return module


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            fields = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
        fields = {key.strip(): value.strip() for key, value in fields.items()}
        cpu = f"{fields['model name']}, family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
    except (OSError, KeyError):
        pass
    info = {
        "cpu": f"{cpu} ({os.cpu_count()} cores)",
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": f"{jax.default_backend()} ({jax.devices()[0].device_kind})",
        "numpy": np.__version__,
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "unset"),
    }
    import flax
    import optax

    info["flax"], info["optax"] = flax.__version__, optax.__version__
    torch = torch_or_none()
    info["torch"] = torch.__version__ if torch else "not installed"
    return info


@dataclasses.dataclass(frozen=True)
class LMShapes:
    """A language-model benchmark's batch of `batch` rows of `time` tokens over `vocab` words."""

    batch: int
    time: int
    vocab: int
    model: ModelConfig


def transformer_config(d_model: int, layers: int, heads: int, d_ff: int, max_len: int, **changes: Any) -> ModelConfig:
    """A Transformer LM's config without dropout (benchmarks time the model, they do not train it well), then
    `changes` (ModelConfig fields)."""
    return ModelConfig(
        kind="transformer",
        d_model=d_model,
        layers=layers,
        num_heads=heads,
        d_ff=d_ff,
        dropout=0.0,
        max_len=max_len,
        **changes,
    )


def transformer_lm(batch: int, time: int, vocab: int, d_model: int, layers: int, heads: int) -> LMShapes:
    """A GPT-2-shaped Transformer LM's benchmark: d_ff 4 · d_model, no dropout, `time` positions."""
    return LMShapes(batch, time, vocab, transformer_config(d_model, layers, heads, 4 * d_model, time))


def step_runner(step: TrainStep, state: TrainState, batch: Batch) -> Callable[[int], None]:
    """`run(n)`: n calls of the train step `step(state, batch) -> (state, metrics)` from `state`,
    carrying the state across calls, blocking on the last loss."""
    holder = {"state": state}

    def run(steps: int) -> None:
        for _ in range(steps):
            holder["state"], metrics = step(holder["state"], batch)
        jax.block_until_ready(metrics["loss"])

    return run


def random_lm_batch(rows: int, time_steps: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    """inputs, targets [rows, time_steps] int32 (one random stream shifted by one, ids past the
    specials) and an all-ones float32 mask."""
    tokens = np.random.default_rng(seed).integers(4, vocab, (rows, time_steps + 1), dtype=np.int32)
    return {"inputs": tokens[:, :-1], "targets": tokens[:, 1:], "mask": np.ones((rows, time_steps), np.float32)}


def lm_train_step(shapes: LMShapes, dtype: Any = jnp.float32) -> tuple[Callable[[int], None], int]:
    """(`step_runner` of the library's LM train step, parameter count) on one device and one
    fixed random batch: teacher forcing, full softmax, AdamW at a constant rate, matmuls in `dtype`."""
    model = build_model(shapes.model, shapes.vocab, dtype=dtype)
    head = build_head(HeadConfig(kind="full"), shapes.vocab, np.ones(shapes.vocab, np.int64))
    optim_cfg = OptimConfig(warmup_steps=0, schedule="constant")
    optimizer = make_optimizer(optim_cfg, 1000)
    mesh = make_mesh("data:1", jax.devices()[:1])
    batch = random_lm_batch(shapes.batch, shapes.time, shapes.vocab)
    state = init_state(model, head, optimizer, 0, batch, mesh)
    step = make_train_step(
        model, head, TeacherForcing(), optimizer, learning_rate_schedule(optim_cfg, 1000), mesh, state
    )
    count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state.params))
    return step_runner(step, state, jax.device_put(batch)), count


def matmul_peak(n: int = 2048, repeats: int = 7, dtype: Any = jnp.float32) -> float:
    """Measured [n, n] x [n, n] matmul throughput of JAX in `dtype` on the default device, GFLOP/s (median)."""
    return 1000 * matmul_tflops(n, repeats, dtype)


Name = TypeVar("Name", bound=Hashable)  # how a caller names its candidates: a string, a (framework, part) pair


def interleaved(
    candidates: Mapping[Name, Callable[[], object]],
    repeats: int,
    before: Mapping[Name, Callable[[], object]] | None = None,
    *,
    warm_up: bool = False,
) -> dict[Name, float]:
    """Median seconds per call of each candidate, timed round-robin so that load hits all alike.

    before: optional untimed calls, run right before a candidate's timed call on each of its
    turns, so that a turn measures the candidate's steady state rather than what switching from
    the other candidates costs it (see `fresh_memory_ms`).
    warm_up: call each candidate once, untimed, before the first turn (compilation, caches,
    the allocator, torch's first-call work).
    """
    if warm_up:
        for fn in candidates.values():
            fn()
    times: dict[Name, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            if before is not None:
                before[name]()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def fresh_memory_ms(megabytes: int = 768, idle_seconds: float = 3.0, repeats: int = 3) -> tuple[float, float]:
    """Median milliseconds to allocate and write `megabytes` of memory (huge pages where the
    kernel gives them) right after the same amount was freed, and after `idle_seconds` idle.

    On a virtual machine whose host takes freed memory back (virtio-balloon free page reporting)
    the second is several times the first, the host mapping and zeroing the pages again: about
    390 against 90 ms on the 2-core AMD EPYC of benchmarks/results/lm_train.md. XLA on CPU
    allocates each execution's temporaries afresh, so a train step that follows another
    framework's turn pays the second price.
    """
    count = megabytes * 2**20 // 4

    def touch() -> float:
        start = time.perf_counter()
        block = np.empty(count, np.float32)
        block.fill(1.0)
        seconds = time.perf_counter() - start
        del block
        return seconds

    touch()
    just_freed = [touch() for _ in range(repeats)]
    after_idle = []
    for _ in range(repeats):
        time.sleep(idle_seconds)
        after_idle.append(touch())
    return 1000 * statistics.median(just_freed), 1000 * statistics.median(after_idle)


def add_timing_arguments(parser: argparse.ArgumentParser, default_steps: int) -> None:
    """--quick, --repeats and --steps, as every train-step benchmark takes them."""
    parser.add_argument("--quick", action="store_true", help="tiny shapes, for a smoke run")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default 5; 2 with --quick)")
    parser.add_argument(
        "--steps", type=int, default=None, help=f"train steps per timed call (default {default_steps}; 1 with --quick)"
    )


def timing(args: argparse.Namespace, default_steps: int) -> tuple[int, int]:
    """(repeats, steps) from `add_timing_arguments`' flags, checked on the host."""
    repeats = args.repeats if args.repeats is not None else (2 if args.quick else 5)
    steps = args.steps if args.steps is not None else (1 if args.quick else default_steps)
    if repeats < 1 or steps < 1:
        raise ValueError(f"--repeats and --steps must be >= 1, got {repeats}, {steps}")
    return repeats, steps


def parse_names(text: str, known: Collection[str], flag: str) -> list[str]:
    """The comma-separated names of `text`, each one of `known`; a clear error otherwise."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or any(n not in known for n in names):
        raise ValueError(f"{flag} must be a comma list of {', '.join(known)}, got {text!r}")
    return names


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def save_figure(figure: Figure, path: str) -> None:
    """Writes a matplotlib figure to `path` (120 dpi, laid out tight) and closes it."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def publish(name: str, quick: bool, title: str, body: str) -> None:
    """Writes `body` as benchmarks/results/NAME.md (NAME_quick.md for --quick) and says where."""
    print("wrote", write_result(f"{name}_quick" if quick else name, title, body))


def write_result(name: str, title: str, body: str, measured_on: dict[str, str] | None = None) -> str:
    """Writes benchmarks/results/NAME.md: the title, the machine, the load, then `body`.

    measured_on: the machine record (`machine()`) of another machine that took the figures (a
    lent GPU's), written instead of this one's, without this machine's load.
    """
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.md")
    info = measured_on or machine()
    with open(path, "w") as f:
        f.write(f"# {title}\n\n")
        f.write("Machine: " + "; ".join(f"{k} {v}" for k, v in info.items()) + "\n\n")
        if measured_on is None:
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            f.write(
                f"Load average (1, 5, 15 min) when written: {load} — the benchmark itself keeps both cores busy (≈ 2); "
                "well above that means other work shared the machine and absolute figures "
                "(not the side-by-side ratios) are depressed.\n\n"
            )
        f.write(body.rstrip() + "\n")
    return path
