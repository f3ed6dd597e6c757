"""Cost of each training objective: target tokens/s of its train step relative to teacher forcing.

    python benchmarks/objectives.py [--quick] [--repeats 5] [--steps 3] [--setups a,b] [--objectives a,b]

Three setups, each with one model, data set and batch shared by all objectives: (a) the
attention RNN encoder–decoder and (b) the Transformer encoder–decoder on the synthetic
reverse task, (c) the LSTM LM of experiments/oracle_objectives.py on the oracle corpus.
Each objective's jitted train step is built as the training loop builds it (the run's
config with `objective.*` overrides -> `build_train_step`: forward, backward, AdamW);
each repeat times `--steps` steps of every objective of a setup, round-robin, and the
table reports medians. Writes benchmarks/results/objectives.md (`--quick`: tiny shapes,
objectives_quick.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    add_timing_arguments,
    interleaved,
    machine,
    markdown_table,
    parse_names,
    publish,
    step_runner,
    timing,
)

from seqjax import config as config_lib  # noqa: E402
from seqjax import optimizers as optim  # noqa: E402
from seqjax.config import Config  # noqa: E402
from seqjax.objectives import build_objective  # noqa: E402
from seqjax.objectives.scheduled_sampling import resolve_mode  # noqa: E402
from seqjax.training.core.experiment import Experiment, build_experiment  # noqa: E402
from seqjax.training.core.layout import make_mesh  # noqa: E402
from seqjax.training.core.state import init_state  # noqa: E402
from seqjax.training.core.steps import build_train_step  # noqa: E402

# Dropout off: scheduled sampling's scan and the sequence-level samplers run the decode step,
# which never drops out; with dropout on, teacher forcing would do work the others skip.
COMMON = ["model.dropout=0.0", "train.batch_size=32", "optim.warmup_steps=0", "optim.schedule=constant"]
SEQ2SEQ = ["data.task=reverse", "data.num_train=256", "data.num_eval=8", "data.buckets=(24,)"]
SETUPS = {  # name -> config overrides
    "attention_seq2seq": SEQ2SEQ + ["model.kind=attention_seq2seq", "model.d_model=256", "model.layers=1"],
    "transformer_seq2seq": SEQ2SEQ
    + [
        "model.kind=transformer_seq2seq",
        "model.d_model=256",
        "model.layers=2",
        "model.num_heads=4",
        "model.d_ff=1024",
        "model.max_len=64",
    ],
    "oracle_lm": [
        "data.task=oracle",
        "data.num_train=256",
        "data.num_eval=8",
        "data.seq_len=84",
        "model.kind=rnn",
        "model.cell=lstm",
        "model.d_model=128",
        "model.layers=1",
    ],
}
QUICK = [  # appended to every setup: tiny shapes (the Transformer's own keys only where they apply)
    "model.d_model=16",
    "train.batch_size=4",
    "data.num_train=64",
    "data.buckets=(12,)",
    "data.max_pair_len=10",
    "data.seq_len=21",
]
QUICK_TRANSFORMER = ["model.d_ff=32", "model.num_heads=2"]
OBJECTIVES = {  # name -> config overrides; defaults otherwise (ObjectiveConfig)
    "teacher_forcing": ["objective.kind=teacher_forcing"],
    "scheduled_sampling": ["objective.kind=scheduled_sampling"],
    "random_replacement": ["objective.kind=random_replacement"],
    "gradient_penalty": ["objective.kind=gradient_penalty"],
    "reinforce": ["objective.kind=reinforce"],
    "mixer": ["objective.kind=mixer"],
    "minimum_risk": ["objective.kind=minimum_risk"],
}
BASELINE = "teacher_forcing"


def setup_config(setup: str, quick: bool) -> Config:
    if setup not in SETUPS:
        raise ValueError(f"setup must be one of {sorted(SETUPS)}, got {setup!r}")
    quick_keys = QUICK + (QUICK_TRANSFORMER if "transformer" in setup else []) if quick else []
    return config_lib.override(Config(), COMMON + SETUPS[setup] + quick_keys)


def with_objective(exp: Experiment, objective: str) -> Experiment:
    """`exp` (data, model, head kept) trained with `objective`'s overrides on top of its config."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {objective!r}")
    cfg = config_lib.override(exp.cfg, OBJECTIVES[objective])
    return dataclasses.replace(exp, cfg=cfg, objective=build_objective(cfg.objective))


def describe_objective(exp: Experiment) -> str:
    """The options that decide the objective's cost (what it runs beyond one forward pass)."""
    kind = exp.cfg.objective.kind
    o = exp.cfg.objective.options
    if kind == "scheduled_sampling":
        scan = resolve_mode(exp.model, o.mode, o.feed) == "scan"
        return f"{o.feed} feed, " + ("scan over the decode step" if scan else f"{o.passes} parallel passes")
    if kind in ("reinforce", "mixer"):
        mixed = f", Δ from {o.delta_start}" if kind == "mixer" else ""
        return f"{o.sequences_per_source} samples, {o.baseline} baseline{mixed}"
    if kind == "minimum_risk":
        return f"{o.num_candidates} {o.search} candidates"
    if kind == "random_replacement":
        return f"rates {o.sequence_rate:g}/{o.token_rate:g}, pool {o.pool}"
    if kind == "gradient_penalty":
        return "nested jax.grad"
    return "-"


def timed_train_step(exp: Experiment, batch: dict[str, np.ndarray], mesh: Mesh) -> Callable[[int], None]:
    """Runs n train steps of `exp`'s objective on `batch`, as the loop builds them; blocks at the end."""
    cfg = exp.cfg
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, batch, mesh, cfg.train.sharding)
    step = build_train_step(exp, optimizer, schedule, mesh, state)
    return step_runner(step, state, jax.device_put(batch))


def relative_rows(
    setup: str, seconds: dict[str, float], tokens: int, steps: int, options: dict[str, str]
) -> list[list[str]]:
    """Table rows: objective, options, ms per step, target tokens/s, throughput / teacher forcing."""
    per_second = {name: tokens * steps / s for name, s in seconds.items()}
    baseline = per_second.get(BASELINE)
    return [
        [
            setup,
            name,
            options[name],
            f"{1000 * s / steps:,.1f}",
            f"{per_second[name]:,.0f}",
            f"{per_second[name] / baseline:.2f}x" if baseline else "n/a",
        ]
        for name, s in seconds.items()
    ]


def bench_setup(setup: str, objectives: list[str], *, quick: bool, repeats: int, steps: int) -> list[list[str]]:
    exp = build_experiment(setup_config(setup, quick))
    batch = exp.train_batches().batch(0)
    tokens = int(batch["mask"].sum())
    mesh = make_mesh("data:1", jax.devices()[:1])
    runs: dict[str, Callable[[int], None]] = {}
    options: dict[str, str] = {}
    for name in objectives:
        variant = with_objective(exp, name)
        runs[name] = timed_train_step(variant, batch, mesh)
        options[name] = describe_objective(variant)
        runs[name](2)  # compile, warm up
        print(f"{setup}: {name} compiled", flush=True)
    seconds = interleaved({name: functools.partial(run, steps) for name, run in runs.items()}, repeats)
    shape = " × ".join(str(n) for n in batch["targets"].shape)
    print(f"{setup}: batch {shape} targets, {tokens:,} target tokens per step")
    rows = relative_rows(setup, seconds, tokens, steps, options)
    for row in rows:
        print(" | ".join(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timing_arguments(p, default_steps=3)
    p.add_argument("--setups", default=",".join(SETUPS))
    p.add_argument("--objectives", default=",".join(OBJECTIVES))
    args = p.parse_args(argv)
    repeats, steps = timing(args, default_steps=3)
    setups = parse_names(args.setups, SETUPS, "--setups")
    objectives = parse_names(args.objectives, OBJECTIVES, "--objectives")
    if BASELINE not in objectives:
        objectives.insert(0, BASELINE)  # every ratio is against it
    print("machine:", machine())
    rows = [
        row
        for setup in setups
        for row in bench_setup(setup, objectives, quick=args.quick, repeats=repeats, steps=steps)
    ]
    table = markdown_table(["setup", "objective", "options", "ms / step", "target tok/s", "throughput / TF"], rows)
    print(table)
    shapes = "\n".join(f"- {setup}: `{' '.join(SETUPS[setup] + (QUICK if args.quick else []))}`" for setup in setups)
    body = (
        f"Medians of {repeats} interleaved repeats of {steps} train step(s) (forward, backward, AdamW; full "
        f"softmax; dropout 0) per objective, the same batch for all objectives of a setup. Common overrides: "
        f"`{' '.join(COMMON)}`; per setup:\n\n{shapes}\n\nObjectives at their `ObjectiveConfig` defaults. "
        f"Throughput / TF is the objective's target tokens/s over teacher forcing's (1/x is its cost as a "
        f"multiple).\n\n{table}\n"
    )
    publish("objectives", args.quick, "Training cost of each objective relative to teacher forcing", body)


if __name__ == "__main__":
    main()
