"""Compile time, step time and per-device memory of every sharding strategy, on 8 devices.

    python benchmarks/scaling.py [--quick] [--repeats 5]

A Transformer LM with the full softmax trains on random tokens under each layout of
`seqjax.training` — data parallel (jit, and the explicit shard_map step), FSDP, tensor
parallel, FSDP + tensor, and FSDP + tensor with the vocabulary-parallel softmax — plus data
parallel with a 4x batch in 4 microbatches (gradient accumulation). Every layout starts
from the same parameters and sees the same batches, so its final loss must equal the data
parallel one; the table reports the difference as a correctness check beside the numbers.

Reported per layout: compile seconds (lower + compile of the train step), median step
seconds over `--repeats` interleaved steps and the ratio to data parallel, per-device bytes
of parameters, optimizer state and the compiled step's temporaries (activations,
gradients), and XLA's peak estimate.

Without accelerators the 8 devices are simulated on the host CPU
(`--xla_force_host_platform_device_count=8`): they share its cores, so step times say
nothing about scaling and only memory and correctness are meaningful. Single-GPU
tokens/s and MFU are measured by benchmarks/mfu.py.

Writes benchmarks/results/scaling.md and scaling.png (`--quick`: small shapes, *_quick.*).
"""

from __future__ import annotations

import os

if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RESULTS,
    LMShapes,
    interleaved,
    markdown_table,
    random_lm_batch,
    save_figure,
    transformer_lm,
    write_result,
)

from seqjax.config import HeadConfig, OptimConfig  # noqa: E402
from seqjax.heads import build_head  # noqa: E402
from seqjax.heads.full_head import VocabParallelSoftmax  # noqa: E402
from seqjax.models import build_model  # noqa: E402
from seqjax.objectives import TeacherForcing  # noqa: E402
from seqjax.optimizers import learning_rate_schedule, make_optimizer  # noqa: E402
from seqjax.training.core.layout import batch_sharding, check_batch_size, make_mesh, validate_strategy  # noqa: E402
from seqjax.training.core.memory import format_bytes, memory_report  # noqa: E402
from seqjax.training.core.state import TrainState, abstract_state, init_state, placement  # noqa: E402
from seqjax.training.core.steps import TrainStep, make_train_step  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Layout:
    name: str
    mesh: str
    sharding: str = "data"
    step_kind: str = "jit"
    vocab_parallel: bool = False
    accum_steps: int = 1


LAYOUTS = (
    Layout("data", "data:8"),
    Layout("data, shard_map step", "data:8", step_kind="shard_map"),
    Layout("fsdp", "data:8", "fsdp"),
    Layout("tensor", "data:4,model:2", "tensor"),
    Layout("fsdp_tensor", "data:4,model:2", "fsdp_tensor"),
    Layout("fsdp_tensor + vocab parallel", "data:4,model:2", "fsdp_tensor", vocab_parallel=True),
    Layout("data, 4x batch in 4 microbatches", "data:8", accum_steps=4),
)


FULL = transformer_lm(32, 128, 16_384, d_model=512, layers=4, heads=8)
QUICK = transformer_lm(16, 32, 1_024, d_model=64, layers=2, heads=4)


def prepare(
    layout: Layout, shapes: LMShapes, initial: TrainState
) -> tuple[TrainStep, TrainState, dict[str, jax.Array], float, dict[str, int]]:
    """(step function, its state, its batch on the mesh, compile seconds, memory report)."""
    mesh = make_mesh(layout.mesh)
    validate_strategy(layout.sharding, mesh)
    rows = shapes.batch * layout.accum_steps
    check_batch_size(rows, mesh, layout.accum_steps)
    model = build_model(shapes.model, shapes.vocab)
    head = build_head(HeadConfig(kind="full"), shapes.vocab, np.ones(shapes.vocab, np.int64))
    if layout.vocab_parallel:
        head = VocabParallelSoftmax(vocab_size=shapes.vocab, mesh=mesh)
    optim_cfg = OptimConfig(warmup_steps=0, schedule="constant", learning_rate=1e-3)
    optimizer, schedule = make_optimizer(optim_cfg, 1000), learning_rate_schedule(optim_cfg, 1000)
    example = random_lm_batch(shapes.batch, shapes.time, shapes.vocab)
    state = jax.device_put(initial, placement(abstract_state(model, head, optimizer, example, mesh, layout.sharding)))
    args = (model, head, TeacherForcing(), optimizer, schedule, mesh, state)
    step = make_train_step(*args, accum_steps=layout.accum_steps, strategy=layout.sharding, step_kind=layout.step_kind)
    # The 4x batch repeats the base batch, so its gradient (a token-weighted mean) is the same.
    base = random_lm_batch(shapes.batch, shapes.time, shapes.vocab)
    batch = {k: np.concatenate([v] * layout.accum_steps) for k, v in base.items()}
    batch = jax.device_put(batch, batch_sharding(mesh))
    abstract = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding) for k, v in batch.items()}
    start = time.perf_counter()
    memory = memory_report(step, state, abstract)
    return step, state, batch, time.perf_counter() - start, memory


def initial_state(shapes: LMShapes) -> TrainState:
    """The shared starting point, built once on one device and copied to the host."""
    model = build_model(shapes.model, shapes.vocab)
    head = build_head(HeadConfig(kind="full"), shapes.vocab, np.ones(shapes.vocab, np.int64))
    optimizer = make_optimizer(OptimConfig(warmup_steps=0, schedule="constant"), 1000)
    example = random_lm_batch(shapes.batch, shapes.time, shapes.vocab)
    state: TrainState = jax.device_get(
        init_state(model, head, optimizer, 0, example, make_mesh("data:1", jax.devices()[:1]))
    )
    return state


def run(shapes: LMShapes, repeats: int) -> list[dict[str, Any]]:
    initial = initial_state(shapes)
    prepared = {layout.name: (layout, *prepare(layout, shapes, initial)) for layout in LAYOUTS}
    states = {name: entry[2] for name, entry in prepared.items()}
    losses: dict[str, float] = {}

    def stepper(name: str) -> Callable[[], None]:
        step, batch = prepared[name][1], prepared[name][3]

        def once() -> None:
            states[name], metrics = step(states[name], batch)
            losses[name] = float(metrics["loss"])  # blocks until the step is done

        return once

    candidates = {name: stepper(name) for name in prepared}
    for once in candidates.values():
        once()  # warm-up: the first call pays for transfers, not compilation (done in prepare)
    seconds = interleaved(candidates, repeats)
    rows = []
    for name, (layout, _, _, _, compile_s, memory) in prepared.items():
        rows.append(
            {
                "layout": layout,
                "compile_s": compile_s,
                "step_s": seconds[name],
                "memory": memory,
                "loss_diff": abs(losses[name] - losses["data"]),
            }
        )
    return rows


def table(rows: list[dict[str, Any]], tokens_per_step: int) -> str:
    base = next(r for r in rows if r["layout"].name == "data")
    header = [
        "layout",
        "mesh",
        "compile s",
        "step s",
        "step / data",
        "params / device",
        "optimizer / device",
        "temporaries / device",
        "peak / device",
        "peak / data",
        "loss Δ vs data",
    ]
    body = []
    for r in rows:
        m = r["memory"]
        body.append(
            [
                r["layout"].name,
                r["layout"].mesh,
                f"{r['compile_s']:.1f}",
                f"{r['step_s']:.3f}",
                f"{r['step_s'] / base['step_s']:.2f}",
                format_bytes(m["parameters"]),
                format_bytes(m["optimizer_state"]),
                format_bytes(m["step_temporaries"]),
                format_bytes(m["peak_estimate"]),
                f"{m['peak_estimate'] / base['memory']['peak_estimate']:.2f}",
                f"{r['loss_diff']:.1e}",
            ]
        )
    return markdown_table(header, body) + f"\n\nTokens per step: {tokens_per_step:,} (the 4x-batch row: 4x that)."


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["layout"].name for r in rows]
    parts = [("parameters", "parameters"), ("optimizer_state", "optimizer state"), ("step_temporaries", "temporaries")]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    bottom = np.zeros(len(rows))
    for key, label in parts:
        values = np.array([r["memory"][key] for r in rows]) / 2**20
        ax.barh(names, values, left=bottom, label=label)
        bottom += values
    ax.set_xlabel("MiB per device")
    ax.set_title("Per-device memory by layout (8 devices)")
    ax.invert_yaxis()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(parts))
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, for a smoke run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if jax.device_count() < 8:
        raise SystemExit(f"needs 8 devices, got {jax.device_count()}")
    shapes, name = (QUICK, "scaling_quick") if args.quick else (FULL, "scaling")
    backend = jax.default_backend()
    simulated = backend == "cpu"
    note = (
        f"The 8 devices are simulated on the host CPU and share its {os.cpu_count()} cores: step times "
        "do not measure scaling; only memory and correctness (loss Δ) are meaningful here."
        if simulated
        else f"8 {jax.devices()[0].device_kind} devices."
    )
    rows = run(shapes, args.repeats)
    m = shapes.model
    body = (
        f"Transformer LM: d_model {m.d_model}, {m.layers} layers, {m.num_heads} heads, d_ff {m.d_ff}, vocabulary "
        f"{shapes.vocab:,}, batch {shapes.batch} x {shapes.time} tokens, full softmax, AdamW, float32; "
        f"baseline: data parallel (jit) in the same process; median of {args.repeats} interleaved steps.\n\n"
        f"{note}\n\n{table(rows, shapes.batch * shapes.time)}\n\n"
        "Single-GPU tokens/s and MFU (bf16, mid-size Transformer LM) are `benchmarks/mfu.py`'s, measured only "
        "where a GPU is lent (results/mfu.md).\n"
    )
    print(body)
    path = write_result(name, "Scaling: sharding strategies on 8 devices", body)
    plot(rows, os.path.join(RESULTS, f"{name}.png"))
    print("wrote", path, "and", os.path.join(RESULTS, f"{name}.png"))


if __name__ == "__main__":
    main()
