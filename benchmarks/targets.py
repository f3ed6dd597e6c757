"""Sizing table: Llama-shaped LMs of 125M, 1B and 8B parameters and an LSTM LM over 800k words
with each softmax head, compiled for 8 x H100, a TPU v5p 4x4x4 and two of them, on this CPU.

    python benchmarks/targets.py [--rows NAME,...] [--render]

Each row is `seqjax compile`'s report (`seqjax.accelerators.report.compile_report`): the run's
exact train step built from abstract state on the target's devices. Every row puts the same
work on each device (8 rows of 2,048 tokens for the Transformers, 32 of 64 for the LSTM), so a
larger target is a larger global batch. Figures: peak memory per device against what a run may
use, the step time and MFU — the per-kernel estimate on a GPU of a measured family (H100), on
other targets only the roofline bound ("≥ ms", "≤ MFU"), as `seqjax compile` prints them — and
the bytes each device sends per step within its host or slice and across slices. Rows are appended
to benchmarks/results/targets.json as they compile (a long run can be stopped and resumed:
done rows are kept), and the table is written to benchmarks/results/targets.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time

from seqjax.accelerators.targets import parse_target, use_target_compiler

use_target_compiler()  # before anything starts a JAX backend

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, markdown_table, write_result  # noqa: E402
from llama_shapes import LLAMA, MODELS  # noqa: E402

from seqjax import config as config_lib  # noqa: E402
from seqjax.accelerators.report import compile_report  # noqa: E402
from seqjax.config import Config  # noqa: E402

LSTM = ("model.kind=rnn", "model.cell=lstm", "model.d_model=1024", "model.layers=1", "data.seq_len=64")
LSTM_VOCAB = 800_000
HEADS = {
    "full": ("head.kind=full",),
    "sampled": ("head.kind=sampled", "head.num_samples=8192"),
    "nce": ("head.kind=nce", "head.num_samples=8192"),
    "negative": ("head.kind=negative", "head.num_samples=8192"),
    "class": ("head.kind=class",),
    "tree": ("head.kind=tree", "head.tree.tree=huffman"),
    "adaptive": ("head.kind=adaptive", "head.adaptive.cutoffs=20000,200000"),
}
TARGETS = {"h100:8": ("h100:8", 1), "v5p:4x4x4": ("v5p:4x4x4", 1), "2 x v5p:4x4x4": ("v5p:4x4x4", 2)}
TENSOR_MESH = {"h100:8": "data:2,model:4", "v5p:4x4x4": "data:-1,model:4", "2 x v5p:4x4x4": "data:-1,model:4"}


@dataclasses.dataclass(frozen=True)
class Row:
    model: str
    target: str
    strategy: str
    overrides: tuple[str, ...]
    vocab: int

    @property
    def name(self) -> str:
        return f"{self.model} | {self.target} | {self.strategy}"


def rows() -> list[Row]:
    found = []
    for target in TARGETS:
        count = parse_target(*TARGETS[target]).count
        for model, (overrides, vocab) in MODELS.items():
            strategies = ("data", "fsdp") if model == "125M" else ("fsdp", "fsdp_tensor")
            for strategy in strategies:
                layout = [f"train.sharding={strategy}", f"train.batch_size={8 * count}"]
                if strategy == "fsdp_tensor":
                    layout.append(f"train.mesh={TENSOR_MESH[target]}")
                found.append(Row(model, target, strategy, (*LLAMA, *overrides, *layout), vocab))
        if target != "2 x v5p:4x4x4":
            for head, choice in HEADS.items():
                head_layout = ("train.sharding=fsdp", f"train.batch_size={32 * count}", "train.precision=bfloat16")
                found.append(Row(f"LSTM 800k, {head}", target, "fsdp", (*LSTM, *choice, *head_layout), LSTM_VOCAB))
    return found


def commit() -> str:
    """The repository's commit the rows are compiled at (a row records the code it measured)."""
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return found.stdout.strip() or "unknown"


def measure(row: Row) -> dict:
    cfg = config_lib.override(Config(), list(row.overrides))
    start = time.perf_counter()
    try:
        report = compile_report(cfg, parse_target(*TARGETS[row.target]), row.vocab)
    except Exception as err:  # a row that does not compile is a finding, recorded as such
        return {"row": row.name, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}", "commit": commit()}
    return {"row": row.name, "compile_seconds": time.perf_counter() - start, "commit": commit(), **report}


def gib(count: float) -> str:
    return f"{count / 2**30:.1f}"


def step_columns(r: dict) -> tuple[str, str]:
    """Step ms and MFU: the per-kernel estimate, or the roofline bound ("≥", "≤") where the report
    has none (an uncalibrated chip, or a row compiled before the estimate, which had only the bound)."""
    if r.get("estimate", {}).get("model"):
        mfu = r["predicted_mfu"]
        return f"{r['predicted_step_seconds'] * 1e3:,.0f}", "" if mfu is None else f"{mfu:.0%}"
    if "estimate" in r:
        seconds, most = r["estimate"]["step_seconds_at_least"], r["estimate"]["mfu_at_most"]
    else:  # compiled before the estimate: its prediction was the roofline bound
        seconds, most = r["roofline"]["step"], r["predicted_mfu"]
    if seconds is None:
        return "", ""
    return f"≥ {seconds * 1e3:,.0f}", "" if most is None else f"≤ {most:.0%}"


def render(results: list[dict]) -> str:
    header = ["model", "target", "strategy", "fits", "peak GiB / usable", "step ms (est.)", "MFU (est.)"]
    header += ["ICI+NVLink GiB/step", "DCN GiB/step", "fused attn", "compile s", "commit"]
    table = []
    for r in results:
        model, target, strategy = r["row"].split(" | ")
        if "error" in r:
            table.append([model, target, strategy, "does not compile", r["error"], "", "", "", "", "", "", r["commit"]])
            continue
        if "compiler_message" in r or r.get("compiled") is False:  # over the device's memory: no program
            peak = f"≥ {gib(r['per_device_bytes']['peak'])} / {gib(r['usable_memory_bytes'])}"
            row = [model, target, strategy, "**no**", peak, "", "", "", "", "", f"{r['compile_seconds']:.0f}"]
            table.append([*row, r["commit"]])
            continue
        link = sum(v["bytes"] for v in r["collectives"].values())
        dcn = sum(v["bytes"] for v in r["dcn_collectives"].values())
        step, mfu = step_columns(r)
        attention = r["attention"]
        table.append(
            [
                model,
                target,
                strategy,
                "yes" if r["fits"] else "**no**",
                f"{gib(r['per_device_bytes']['peak'])} / {gib(r['usable_memory_bytes'])}",
                step,
                mfu,
                gib(link),
                gib(dcn) if r["slices"] > 1 else "",
                "" if attention["resolved"] is None else f"{attention['resolved']} x{attention['fused_calls']}",
                f"{r['compile_seconds']:.0f}",
                r.get("commit", "earlier"),
            ]
        )
    return markdown_table(header, table)


NOTES = """
How to read it:

- **peak GiB / usable**: the compiled train step's peak per device (parameters, optimizer state,
  batch, activations kept for the backward pass, gradients, collective buffers) against what a
  run may use: on a GPU the 75% of its memory JAX's allocator takes by default
  (`XLA_PYTHON_CLIENT_MEM_FRACTION`), on a TPU the whole HBM.
- **step ms, MFU (est.)**: on the H100 rows, `seqjax compile`'s per-kernel estimate (`docs/scaling.md`):
  each kernel of the compiled step at the matmul rate and memory bandwidth measured on an H200, plus
  a launch cost, one after another; it came within 8-20% of the four H200 steps measured, every one
  predicted faster than it ran (`benchmarks/results/gpu_run.md`), and its collective term (bytes over
  NVLink, no overlap) is not yet held against a multi-GPU measurement. On the TPU rows no step of
  the family was measured: "≥ ms" and "≤ MFU" are the roofline bound — model FLOPs at the dense
  bf16 peak or bytes at the memory bandwidth, whichever is slower, plus the collectives' bytes over
  the links — never a forecast.
- **ICI+NVLink / DCN GiB per step**: the collectives' results per device and step (an
  all-gather's gathered arrays, a reduce-scatter's shard, an all-reduce's array), loop bodies
  counted once per layer — not the ring traffic the estimate times, which is (n-1)/n of the
  gathered arrays, n-1 shards for a reduce-scatter, twice the array for an all-reduce; DCN only
  for the two-slice target, where the gradients are all-reduced across slices and everything else
  stays within a slice.
- **fused attn**: the attention kernel `auto` resolved to on the target and its calls in the
  train step (a scanned stack's body holds one forward, one backward and, under full remat, one
  recomputed forward).
- **commit**: the code a row was compiled at. Every row here is at or after 8bb6a82, where
  under FSDP the full softmax gathers its table once rather than at every vocabulary block (and an
  LSTM its recurrent kernel once rather than at every step). Before it, the GPU compiler gathered
  inside those loops, the TPU compiler less so: the 800k-word LSTM with the full head sent 1,791
  GiB per step on 8 x H100 (8.6 after) and 11.2 GiB on a v5p 4x4x4 (7.7 after); the 8B LM under
  fsdp 242 GiB on 8 x H100 (61 after).
- The class head: since 50e81a5 each device walks its own rows against the table gathered once.
  Before, its walk gathered the table at every step: 8,203 GiB per step for 800k words on 8 x
  H100 (4.0 after; the estimated step 17.4 s, 71 ms after) and 68 GiB on a v5p 4x4x4 (8.7
  after). Since 52804bd each tier of class sizes walks a fixed number of step slots, sized from
  the classes' shares of the counts, in a loop of known trip count, and only steps beyond them in
  a loop whose trip count depends on the data: on a GPU the host reads such a loop's condition
  before every trip (20 µs each in the estimate since aac23f8). At aac23f8, the walk's loop per
  class was estimated at 140.8 ms on 8 x H100 (71.6 ms of it such round trips); at 79be40e 57.5
  ms (1.6 ms), with the same collectives and peak (8.7 GiB). The v5p bound moved 24.5 to 24.7 ms,
  its peak stayed 8.2 GiB.
- The full head: since 20e5cc2 each device walks the row blocks of its own rows
  (`seqjax.heads.full_mean`) and the head weighs its memory choices against the rows a device
  holds. Before, the scan over blocks of rows split across devices gathered the rows to every
  device and scored every block there: compiled at 0fcc39d, the 125M data row sent 12.0 GiB per
  step on 8 x H100 (estimated 142 ms; 0.4 GiB and 48 ms after) and 1.6 GiB on a v5p 4x4x4 with a
  9.1 GiB peak (0.2 GiB, 4.7 GiB after). The same rows compiled at 40bea58, before that loss
  existed, had sent 0.2-0.6 GiB. On 8 x H100 the 125M data row's peak rose from 3.0 to 3.8 GiB:
  its 16,384 rows a device keep their bfloat16 exponentials (1 GiB), as one H200 running the same
  rows does. An 800k-word table has more words than the batch rows, and its rows are not split
  (85bdd6c): summing its gradient over devices sent 4.0 GiB per step on 8 x H100 against the
  compiler's own 1.1.
- The adaptive head: since 0f55fb4 the walk over a tail's rows in blocks (taken by a batch
  beyond the tail's capacity) reads the tail made whole once before it. The GPU compiler had
  gathered the tail at every block: 0.19 GiB a block for the first tail on 8 x H100, counted
  once here because the walk's trip count depends on the data (1.8 GiB per step counted at
  58f7d7d, 1.5 after). On the v5p the TPU compiler had not gathered inside that walk, and the
  change compiled to the same bytes there. Its estimate on 8 x H100 went from 11.3 ms to 34.9 ms
  with the same program (fbd4cbb): the estimate had left the loops inside a conditional's
  branches at one trip, the tails' softmax over blocks of words among them; it now counts them
  and costs a conditional at its costliest branch.
- The LSTM rows: since 9c110a0 a recurrent layer's input projection keeps its rows batch-major
  through the matmul. Merged time-major, the rows the mesh splits by batch were interleaved, and
  under FSDP the TPU compiler all-reduced the whole batch's [T*B, 4H] product, 2 GiB per step.
  At one commit, before and after: on the v5p, the full head's row 5.1 to 2.3 GiB per step
  (bound 31 to 26 ms, peak 7.2 to 7.7 GiB), the sampled heads' 5.2 to 3.2 GiB (23 to 16 ms); on
  8 x H100 the estimate fell from 63 to 53 ms for the full head, whose counted bytes rose from 1.1
  to 2.3 GiB (all-gathers 0.6 to 2.2 GiB; its kernels' launches 15.5 to 2.7 ms of the step),
  and from 9.5 to 8.1 ms for the sampled heads (0.74 to 0.44 GiB).
- Every row here was compiled on this 2-core CPU on a quiet machine (its compile times are
  these cores'): the Transformer rows at 20e5cc2, the LSTM rows at 9c110a0, but the class head's
  at 79be40e and the adaptive head's at fbd4cbb.
- Each device does the same work in every row (8 rows of 2,048 tokens; the LSTM 32 of 64), so a
  target of more devices trains on a larger batch; compare per-device figures across targets.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", help="comma list of row numbers (0-based) to compile; default all")
    parser.add_argument("--render", action="store_true", help="only write the table from the saved rows")
    args = parser.parse_args()
    path = os.path.join(RESULTS, "targets.json")
    saved = json.load(open(path)) if os.path.isfile(path) else []
    done = {r["row"] for r in saved}
    todo = rows() if args.rows is None else [rows()[int(i)] for i in args.rows.split(",")]
    if not args.render:
        for row in todo:
            if row.name in done:
                continue
            print(f"compiling {row.name}", flush=True)
            saved.append(measure(row))
            with open(path, "w") as f:
                json.dump(saved, f, indent=1)
    order = {row.name: i for i, row in enumerate(rows())}
    saved.sort(key=lambda r: order.get(r["row"], len(order)))
    body = render(saved) + "\n" + NOTES
    print("wrote", write_result("targets", "Sizing runs for accelerators: compiled on a CPU, estimated", body))


if __name__ == "__main__":
    main()
