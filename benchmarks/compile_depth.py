"""Compile time of the Transformer LM's train step against depth, unrolled and scanned.

    python benchmarks/compile_depth.py [--quick] [--depths 2,4,8,16,32] [--repeats 1]

For each depth L and `model.scan_layers` false / true, builds the library's jitted train step
(teacher forcing, full softmax, AdamW) of a small Transformer LM and times tracing, lowering
and XLA compilation of that step (`jit(...).lower(...).compile()`, nothing run). Unrolled,
the program holds L copies of the layer and its compile time grows with L; scanned, the
layer is traced once inside a loop. Reports seconds per depth and each column's ratio to its
shallowest depth. Writes benchmarks/results/compile_depth.md (`--quick`: compile_depth_quick.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from typing import cast

import jax
import numpy as np
from jax.stages import Wrapped

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import LLAMA_BLOCKS, machine, markdown_table, parse_names, publish, random_lm_batch  # noqa: E402

from seqjax.config import HeadConfig, ModelConfig, OptimConfig  # noqa: E402
from seqjax.heads import build_head  # noqa: E402
from seqjax.models import build_model  # noqa: E402
from seqjax.objectives import TeacherForcing  # noqa: E402
from seqjax.optimizers import learning_rate_schedule, make_optimizer  # noqa: E402
from seqjax.training.core.layout import make_mesh  # noqa: E402
from seqjax.training.core.state import abstract_state  # noqa: E402
from seqjax.training.core.steps import make_train_step  # noqa: E402

BATCH, TIME, VOCAB = 8, 64, 1000
MODEL = ModelConfig(
    kind="transformer", d_model=128, num_heads=4, kv_heads=2, d_ff=512, dropout=0.1, max_len=TIME, **LLAMA_BLOCKS
)
QUICK_MODEL = dataclasses.replace(MODEL, d_model=32, d_ff=64, max_len=16)
DEPTHS, QUICK_DEPTHS = "2,4,8,16,32", "2,4,8"


def compile_seconds(cfg: ModelConfig, batch: dict[str, np.ndarray]) -> float:
    """Seconds to trace, lower and compile the train step of `cfg` on `batch`'s shapes."""
    model = build_model(cfg, VOCAB)
    head = build_head(HeadConfig(kind="full"), VOCAB, np.ones(VOCAB, np.int64))
    optim_cfg = OptimConfig(warmup_steps=0, schedule="constant")
    optimizer = make_optimizer(optim_cfg, 100)
    mesh = make_mesh("data:1", jax.devices()[:1])
    state = abstract_state(model, head, optimizer, batch, mesh)
    # make_train_step's step is a jitted function: it lowers.
    step = cast(
        Wrapped,
        make_train_step(model, head, TeacherForcing(), optimizer, learning_rate_schedule(optim_cfg, 100), mesh, state),
    )
    start = time.perf_counter()
    step.lower(state, batch).compile()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, depths 2,4,8")
    parser.add_argument("--depths", default=None, help=f"comma list (default {DEPTHS}; {QUICK_DEPTHS} with --quick)")
    parser.add_argument("--repeats", type=int, default=1, help="compilations per cell (median)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    text = args.depths or (QUICK_DEPTHS if args.quick else DEPTHS)
    depths = [int(d) for d in parse_names(text, [str(n) for n in range(1, 257)], "--depths")]
    base = QUICK_MODEL if args.quick else MODEL
    time_steps = base.max_len
    batch = random_lm_batch(BATCH, time_steps, VOCAB)
    print("machine:", machine())
    compile_seconds(dataclasses.replace(base, layers=1), batch)  # the process's one-time compiler start-up
    seconds: dict[tuple[int, bool], float] = {}
    for depth in depths:
        for scan in (False, True):
            cfg = dataclasses.replace(base, layers=depth, scan_layers=scan)
            seconds[depth, scan] = statistics.median(compile_seconds(cfg, batch) for _ in range(args.repeats))
            print(f"layers {depth:3d} scan_layers={scan!s:5}: {seconds[depth, scan]:.2f} s")
    first = depths[0]
    rows = [
        [
            depth,
            f"{seconds[depth, False]:.2f}",
            f"{seconds[depth, False] / seconds[first, False]:.2f}x",
            f"{seconds[depth, True]:.2f}",
            f"{seconds[depth, True] / seconds[first, True]:.2f}x",
        ]
        for depth in depths
    ]
    header = ["layers", "unrolled s", f"vs {first}", "scan_layers s", f"vs {first}"]
    m = base
    note = (
        "Trace + lower + XLA compile of one jitted train step (teacher forcing, full softmax, AdamW), nothing run; "
        f"B={BATCH} T={time_steps} D={m.d_model} H={m.num_heads} K={m.kv_heads} F={m.d_ff} V={VOCAB}, rope, rmsnorm, "
        f"swiglu, no biases, dropout {m.dropout}; median of {args.repeats} per cell."
    )
    body = f"{note}\n\n{markdown_table(header, rows)}\n"
    print(body)
    publish("compile_depth", args.quick, "Compile time against depth: unrolled and scanned layers", body)


if __name__ == "__main__":
    main()
