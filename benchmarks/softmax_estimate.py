"""The softmax heads' step on a GPU without one: each case of softmax_gpu.py compiled here for the
target, its step time ESTIMATED by the per-kernel model and its peak memory from XLA.

    python benchmarks/softmax_estimate.py [--target h200:1] [--vocab 100000] [--rows 16384] [--out DIR]

Each case is one jitted value_and_grad of a head's training loss with respect to the hidden
states and every parameter (softmax_cases.head_configs, optax's cross-entropy on materialized
logits), on float32 inputs as softmax_gpu.py times them, compiled on this CPU for the target
(`seqjax.accelerators.targets`). The step is `seqjax.accelerators.estimate.step_seconds` of the
compiled program's kernels; the memory is `memory_analysis`'s peak (arguments + outputs +
temporaries). Beside each, the time softmax_gpu.py measured for the same case where one is
recorded (benchmarks/results/softmax_gpu.json, measured on the code of its run), and the
model's error on the recorded GPU train steps (calibration.json).

Writes DIR/softmax_estimate.md and DIR/softmax_estimate.json (default: benchmarks/results).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seqjax.accelerators.targets import parse_target, target_devices, use_target_compiler  # noqa: E402

use_target_compiler()  # before anything starts a JAX backend

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from common import RESULTS, machine, markdown_table  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from softmax_cases import Shapes, head_configs, make_inputs, zipf_counts  # noqa: E402

from seqjax.accelerators import estimate, kernels, program  # noqa: E402
from seqjax.config import HeadConfig  # noqa: E402
from seqjax.heads import FullOptions, build_head  # noqa: E402
from seqjax.heads.class_blocks import TIER_SCOPE, rows_per_step, slot_capacities, tiers_of  # noqa: E402
from seqjax.heads.classes import _tier_of_class  # noqa: E402
from seqjax.heads.full import DEFAULT_CHUNK  # noqa: E402

EARLIER_FULL = "full, recomputed vocabulary blocks"
CLASS_CASE = "class (sqrt V classes)"
# The case whose measurement in softmax_gpu.json a row stands beside, where it differs from its
# name: the full head's default trained on recomputed vocabulary blocks when that was measured; the
# class head's walk then took 8 rows a step, a loop per class (no program here is the one measured).
MEASURED_AS = {EARLIER_FULL: "full", "full": None, CLASS_CASE: None}
# A case's program: (function, abstract arguments).
Program = tuple[Callable[..., Any], tuple[Any, ...]]


def head_program(cfg: HeadConfig, vocab_size: int, shapes: Shapes) -> Program:
    """value_and_grad of the head's training loss in its parameters and the hidden states."""
    head = build_head(cfg, vocab_size, zipf_counts(vocab_size))
    hidden = jax.ShapeDtypeStruct((shapes.rows, shapes.features), jnp.float32)
    targets = jax.ShapeDtypeStruct((shapes.rows,), jnp.int32)
    key = jax.eval_shape(lambda: jax.random.key(0))

    def init(key: jax.Array, hidden: jax.Array, targets: jax.Array) -> Any:
        return head.init({"params": key}, hidden, targets, key, None, None, method="loss")

    params = nn.meta.unbox(jax.eval_shape(init, key, hidden, targets))["params"]

    def loss(params: Any, hidden: jax.Array, targets: jax.Array, key: jax.Array) -> jax.Array:
        value: jax.Array = head.apply({"params": params}, hidden, targets, key, None, None, method="loss")[0]
        return value

    return jax.value_and_grad(loss, argnums=(0, 1)), (params, hidden, targets, key)


def optax_program(vocab_size: int, shapes: Shapes) -> Program:
    """optax's cross-entropy of materialized logits h Wᵀ + b, as softmax_cases' baseline."""
    import optax

    def loss(weights: jax.Array, biases: jax.Array, hidden: jax.Array, targets: jax.Array) -> jax.Array:
        logits = hidden @ weights.T + biases
        losses: jax.Array = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
        return losses.mean()

    args = (
        jax.ShapeDtypeStruct((vocab_size, shapes.features), jnp.float32),
        jax.ShapeDtypeStruct((vocab_size,), jnp.float32),
        jax.ShapeDtypeStruct((shapes.rows, shapes.features), jnp.float32),
        jax.ShapeDtypeStruct((shapes.rows,), jnp.int32),
    )
    return jax.value_and_grad(loss, argnums=(0, 1, 2)), args


def programs(vocab_size: int, shapes: Shapes) -> dict[str, Program]:
    """Every head of softmax_gpu.py's table, the earlier default of the full head, and optax."""
    found = {name: head_program(cfg, vocab_size, shapes) for name, cfg in head_configs(vocab_size, shapes).items()}
    earlier = FullOptions(chunk_size=min(DEFAULT_CHUNK, vocab_size), block_residuals="recompute")
    found[EARLIER_FULL] = head_program(HeadConfig(kind="full", groups=(earlier,)), vocab_size, shapes)
    found["optax cross-entropy"] = optax_program(vocab_size, shapes)
    return found


def estimated(
    fn: Callable[..., Any], args: tuple[Any, ...], mesh: Mesh, kind: str, trips: program.Trips | None
) -> dict[str, Any]:
    """The program compiled for the mesh's devices (every array replicated): its estimated step
    and parts (seconds), a loop of data-dependent trip count taking `trips` of it per entry (one
    without), its kernel launches, and its memory (bytes); where it has such loops, its step at
    one and at two trips per entry of each too."""
    placed = NamedSharding(mesh, PartitionSpec())
    abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=placed), args)
    began = time.perf_counter()
    compiled = jax.jit(fn).lower(*abstract).compile()
    text = compiled.as_text() or ""
    found = kernels.kernels(text, trips=trips)
    seconds = estimate.step_seconds(found, kind)
    if seconds is None:
        raise SystemExit(f"no calibration covers {kind}: the per-kernel model gives no estimate")
    loops = program.data_dependent_loops(text)
    at = {n: estimate.step_seconds(kernels.kernels(text, trips=constant_trips(n)), kind) for n in (1, 2)}
    return {
        "seconds": seconds,
        "launches": sum(k.count for k in found if k.kind != "round_trip"),
        "round_trips": sum(k.count for k in found if k.kind == "round_trip"),
        "memory": program.memory(compiled),
        "compile_s": time.perf_counter() - began,
        "data_dependent_loops": loops,
        "batch_trips": trips is not None,
        "seconds_one_trip": at[1] if loops else None,
        "seconds_two_trips": at[2] if loops else None,
    }


def constant_trips(trips: float) -> program.Trips:
    """The same trips per entry for every loop of data-dependent trip count."""
    return lambda line: trips


def class_head(vocab_size: int, shapes: Shapes) -> Any:
    return build_head(head_configs(vocab_size, shapes)[CLASS_CASE], vocab_size, zipf_counts(vocab_size))


def class_walk(vocab_size: int, shapes: Shapes) -> dict[str, Any]:
    """The class head's walk over the batch softmax_gpu.py times (`make_inputs`): its steps, its
    tiers' step slots, and per tier the steps beyond its slots (the trips of its loop whose trip
    count depends on the data)."""
    _, _, targets = make_inputs(vocab_size, shapes)
    classes = class_head(vocab_size, shapes).classes
    step_rows = rows_per_step(shapes.rows, classes.num_classes)
    steps = -(-np.bincount(classes.class_of[np.asarray(targets)], minlength=classes.num_classes) // step_rows)
    tiers = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes), classes.shares)
    capacities = slot_capacities(tiers, shapes.rows, step_rows)
    tier_steps = [int(steps[tier.classes].sum()) for tier in tiers]
    return {
        "classes": classes.num_classes,
        "rows_per_step": step_rows,
        "steps": int(steps.sum()),
        "slots": sum(capacities),
        "per_tier": [float(max(0, n - capacity)) for n, capacity in zip(tier_steps, capacities)],
    }


def tier_trips(per_tier: list[float]) -> program.Trips:
    """Trips per entry of the class walk's loops, by the tier their scope names."""

    def trips(line: str) -> float:
        tier = re.search(rf"{TIER_SCOPE}(\d+)\b", line)
        if tier is None:
            named = re.search(r'op_name="([^"]*)"', line)
            raise ValueError(f"a loop of data-dependent trips outside the class walk: {named and named.group(1)}")
        return per_tier[int(tier.group(1))]

    return trips


def measured_seconds(path: str, vocab_size: int) -> dict[str, float]:
    """{case: seconds} softmax_gpu.py measured at V (empty where nothing is recorded)."""
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        speed = json.load(f).get("speed", {}).get(str(vocab_size), {})
    return {name: entry["seconds"] for name, entry in speed.items() if "seconds" in entry}


def render(report: dict[str, Any]) -> str:
    shapes, target = report["shapes"], report["target"]
    lines = [
        "# Softmax heads on a GPU: ESTIMATES",
        "",
        f"**Estimated, not measured**: every case compiled on this CPU for {target} (no GPU), its step "
        "the per-kernel model's (`seqjax.accelerators.estimate`: each kernel the longest of its matrix FLOPs "
        "at the measured matmul rate, its elementwise work and its bytes, plus a launch; kernels one after "
        "another), its memory XLA's `memory_analysis` peak of the compiled step. Written by "
        "benchmarks/softmax_estimate.py.",
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in report["machine"].items()),
        "",
        f"V = {shapes['vocab']:,}, N = {shapes['rows']} rows, D = {shapes['features']}, K = {shapes['samples']} "
        "samples, float32 inputs at JAX's default matmul precision; one jitted value_and_grad with respect to "
        "the hidden states and every parameter, as benchmarks/softmax_gpu.py times it.",
        "",
    ]
    materialized = report["cases"]["full, materialized"]
    rows = []
    for name, entry in report["cases"].items():
        step, peak = entry["seconds"]["step"], entry["memory"]["peak"]
        measured = report["measured"].get(name)
        rows.append(
            [
                name,
                f"{step * 1e3:.2f} ms",
                f"{step / materialized['seconds']['step']:.2f}x",
                f"{peak / 2**20:,.0f}",
                f"{peak / materialized['memory']['peak']:.1%}",
                f"{entry['launches']:,.0f}",
                f"{entry['round_trips']:,.0f}",
                "" if measured is None else f"{measured * 1e3:.2f} ms ({step / measured - 1:+.0%})",
            ]
        )
    header = ["case", "estimated step", "/ materialized", "peak MiB", "/ materialized", "launches", "round trips"]
    lines += [markdown_table([*header, "measured earlier (estimate's error)"], rows), ""]
    lines += [
        "## The model's error",
        "",
        "On the GPU train steps recorded in calibration.json (predicted / measured - 1):",
        "",
        markdown_table(
            ["step", "target", "measured", "estimated", "error"],
            [
                [e["row"], e["target"], f"{e['measured_seconds'] * 1e3:.1f} ms"]
                + [f"{e['predicted_seconds'] * 1e3:.1f} ms", f"{e['error']:+.0%}"]
                for e in report["model_errors"]
            ],
        ),
        "",
        "The last column of the table above holds it against softmax_gpu.py's measurements of these "
        "cases (benchmarks/results/softmax_gpu.json), each a program of the code that run measured: "
        f"'{EARLIER_FULL}' is what the full head trained on then. The full and class heads' present "
        "defaults have no measurement yet; the class head's (158.95 ms) was of a walk that took 8 rows a "
        "step in a loop per class whose trip count depended on the data, 5,006 round trips to the host, "
        "from which the model's figure for a round trip (calibration.json) is derived. A round trip is "
        "the host waiting for a value of the device's before it goes on: a conditional's branch, each "
        "trip of a loop whose trip count depends on the data and once more to stop.",
        "",
        *loop_lines(report),
    ]
    return "\n".join(lines) + "\n"


def loop_lines(report: dict[str, Any]) -> list[str]:
    """The cases whose programs hold loops of data-dependent trip counts: their steps at one and at
    two trips per entry, and the class walk's at the timed batch's own trips."""
    looped = {name: entry for name, entry in report["cases"].items() if entry["data_dependent_loops"]}
    if not looped:
        return []
    walk, entry, full = report["class_walk"], report["cases"][CLASS_CASE], report["cases"]["full"]

    def ms(seconds: dict[str, float]) -> str:
        return f"{seconds['step'] * 1e3:.2f} ms"

    rows = [
        [name, str(e["data_dependent_loops"]), ms(e["seconds_one_trip"]), ms(e["seconds_two_trips"])]
        + [ms(e["seconds"]) if e["batch_trips"] else ""]
        for name, e in looped.items()
    ]
    faster = entry["seconds"]["step"] < full["seconds"]["step"]
    return [
        "## Loops whose trip count depends on the data",
        "",
        "Such a loop runs one trip per entry in the model unless told its trips, and a conditional costs "
        "its costliest branch. The class head's walk is told them: each tier of class sizes "
        "walks its step slots in a loop of known trip count, then the steps beyond them in a loop "
        "(forward and backward, named for the tier) whose trips here are the timed batch's. The "
        "adaptive head's loops are its fallback for tails beyond their capacity, which this batch does "
        "not reach, in the branch of a conditional the model counts where it is the costlier. Each case "
        "at one and at two trips per entry, and at the batch's:",
        "",
        markdown_table(["case", "loops", "one trip per entry", "two", "the batch's trips"], rows),
        "",
        f"The class head's walk over the timed batch: {walk['steps']:,} steps of {walk['rows_per_step']} rows "
        f"over {walk['classes']} classes in {walk['slots']:,} slots, {sum(walk['per_tier']):,.0f} steps beyond "
        f"them. Its step is estimated at {ms(entry['seconds'])}, "
        + ("below" if faster else "not below")
        + f" the full head's {ms(full['seconds'])}.",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="h200:1")
    parser.add_argument("--vocab", type=int, default=100_000)
    Shapes.add_arguments(parser)
    parser.add_argument("--measured", default=os.path.join(RESULTS, "softmax_gpu.json"))
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    target = parse_target(args.target)
    if target.chip.platform != "gpu" or target.count != 1:
        raise SystemExit(f"--target must be one GPU (kind:1, e.g. h200:1), got {args.target}")
    kind = args.target.split(":")[0].lower()
    mesh = Mesh(np.array(target_devices(target)), ("devices",))
    shapes = Shapes.parsed(args)
    measured = measured_seconds(args.measured, args.vocab)
    report: dict[str, Any] = {
        "machine": {**machine(), "target": target.describe()},
        "target": target.describe(),
        "shapes": {"vocab": args.vocab, "rows": shapes.rows, "features": shapes.features, "samples": shapes.samples},
        "cases": {},
        "measured": {},
        "model_errors": estimate.measured_errors(kind),
        "class_walk": class_walk(args.vocab, shapes),
    }
    for name, (fn, fn_args) in programs(args.vocab, shapes).items():
        trips = tier_trips(report["class_walk"]["per_tier"]) if name == CLASS_CASE else None
        report["cases"][name] = estimated(fn, fn_args, mesh, kind, trips)
        entry = report["cases"][name]
        step, peak = entry["seconds"]["step"], entry["memory"]["peak"]
        print(f"{name}: {step * 1e3:.2f} ms, {peak / 2**20:,.0f} MiB", flush=True)
        source = MEASURED_AS.get(name, name)
        if source is not None and source in measured:
            report["measured"][name] = measured[source]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "softmax_estimate.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.out, "softmax_estimate.md"), "w") as f:
        f.write(render(report))
    print("wrote", os.path.join(args.out, "softmax_estimate.md"), flush=True)


if __name__ == "__main__":
    main()
