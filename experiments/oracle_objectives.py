"""Exposure bias on the oracle task: teacher forcing vs scheduled
sampling with each decay vs random replacement vs the embedding gradient penalty.

    python experiments/oracle_objectives.py [--workdir runs/oracle_objectives] [--seeds 0,1]
        [--steps 600] [--objectives teacher_forcing,ss_linear,...] [--quick]

Trains one LSTM LM per objective and seed (train.seed; the oracle corpus, data.seed, stays
fixed) through `seqjax.training.loop.train`, each in WORKDIR/<objective>-seed<seed>, then
prints a markdown table of the oracle's NLL of 1000 model samples (generation quality,
which exposure bias hurts) and the model's NLL of the held-out test split (fit), as
mean ± half the range over seeds; the table is also written to WORKDIR/table.md, and with the
runs' records to experiments/results/oracle_objectives.json and .md (a --quick run's to WORKDIR). A run
directory that already holds a finished run (summary.json, same config) is read, not
retrained, and a run cut off mid-way resumes from its last checkpoint, so a stopped sweep
continues where it stopped. `seqjax train --config experiments/oracle_objectives.py`
trains the teacher-forcing run alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps  # noqa: E402

from seqjax.config import Config, DataConfig, ModelConfig, ObjectiveConfig, OptimConfig, TrainConfig
from seqjax.data.synthetic.oracle import make_oracle, oracle_nll, oracle_sample
from seqjax.objectives import ScheduledSampling

DEFAULT_STEPS = 600  # teacher forcing: 1.75 CPU-minutes a run on a 2-core AMD EPYC CPU (measured); SS ~1.3x, GP ~2.5x
QUICK_STEPS = 6
SENTENCE = 21  # the oracle's 20 tokens and the EOS that ends each line
OBJECTIVES = (
    "teacher_forcing",
    "ss_linear",
    "ss_exponential",
    "ss_inverse_sigmoid",
    "random_replacement",
    "gradient_penalty",
)
MEASURES = (  # (column, summary path): what the table reports of each run
    ("oracle NLL of samples", ("samples", "oracle_nll")),
    ("test NLL", ("test", "nll")),
    ("well-formed samples", ("samples", "oracle_well_formed")),
)


def get_config(steps: int = DEFAULT_STEPS) -> Config:
    """The teacher-forcing run: a 1-layer LSTM LM on the oracle corpus (V = 1000, 20-token lines).

    Rows are 4 oracle lines (84 = 4 × 21 tokens, so every row starts at a line start): samples
    begin from a fresh state fed EOS, and the rows teach what follows an EOS 3 times each,
    after a line of context. Dropout is off because scheduled sampling feeds tokens through the decode step,
    which never drops out; with dropout the objectives would differ in two ways at once.
    """
    return Config(
        data=DataConfig(kind="synthetic", task="oracle", seq_len=4 * SENTENCE, num_train=20000, num_eval=500),
        model=ModelConfig(kind="rnn", cell="lstm", d_model=128, layers=1, dropout=0.0),
        optim=OptimConfig(learning_rate=3e-3, warmup_steps=min(100, steps // 10)),
        train=TrainConfig(
            steps=steps,
            batch_size=32,
            log_every=50,
            eval_every=0,
            checkpoint_every=max(steps // 4, 1),
            keep_checkpoints=1,
        ),
    )


def quick_config(steps: int = QUICK_STEPS) -> Config:
    """Tiny sizes for a smoke test: seconds per run, numbers meaningless."""
    cfg = get_config(steps)
    return dataclasses.replace(
        cfg,
        data=dataclasses.replace(cfg.data, seq_len=SENTENCE, num_train=64, num_eval=16),
        model=dataclasses.replace(cfg.model, d_model=16),
        train=dataclasses.replace(cfg.train, batch_size=8, log_every=3, num_printed_samples=1, printed_sample_len=8),
    )


def inverse_sigmoid_k(midpoint: float) -> float:
    """The k ≥ 1 with k·ln k = midpoint, where ε = k / (k + e^(step/k)) crosses 0.5."""
    low, high = 1.0, max(2.0, midpoint + 1.0)  # k·ln k ≥ k − 1, so k ≤ midpoint + 1
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if middle * math.log(middle) < midpoint else (low, middle)
    return (low + high) / 2


def objective_config(name: str, steps: int) -> ObjectiveConfig:
    """The objective `name` with its schedule scaled to `steps`: every scheduled-sampling decay
    starts at ε ≈ 1 (gold) and passes ε = 0.5 at mid-run, so the three differ only in shape."""
    if name not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {name!r}")
    if not name.startswith("ss_"):
        return ObjectiveConfig(kind=name)
    # Sampled, not argmax: the model is judged on its samples, so it trains on prefixes like them.
    sampling: dict[str, Any] = dict(feed="sample", mode="scan")
    decay: dict[str, Any]
    if name == "ss_linear":  # 1 − step/steps: 0.5 at mid-run, 0 at the end
        decay = dict(schedule="linear", k=1.0, c=1.0 / steps, eps_min=0.0)
    elif name == "ss_exponential":  # k^step: 0.5 at mid-run, 0.25 at the end
        decay = dict(schedule="exponential", k=0.5 ** (2.0 / steps))
    else:
        decay = dict(schedule="inverse_sigmoid", k=inverse_sigmoid_k(steps / 2))
    return ObjectiveConfig(kind="scheduled_sampling", groups=(ScheduledSampling(**sampling, **decay),))


def run_config(base: Config, name: str, seed: int) -> Config:
    return dataclasses.replace(
        base,
        objective=objective_config(name, base.train.steps),
        train=dataclasses.replace(base.train, seed=seed),
    )


def measures(summary: dict) -> dict[str, float]:
    """The table's values of one run, from its summary."""
    return {column: float(summary[section][key]) for column, (section, key) in MEASURES}


def describe(objective: ObjectiveConfig) -> str:
    """The objective's settings, as the table's second column."""
    o = objective.options
    if objective.kind == "scheduled_sampling":
        if o.schedule == "linear":
            decay = f"ε = max({o.eps_min:g}, {o.k:g} − {o.c:.3g}·step)"
        elif o.schedule == "exponential":
            decay = f"ε = {o.k:.6g}^step"
        else:
            decay = f"ε = k / (k + e^(step/k)), k = {o.k:.1f}"
        return f"{decay}; feed {o.feed}"
    if objective.kind == "random_replacement":
        return f"rows {o.sequence_rate:g}, tokens {o.token_rate:g}, pool {o.pool}"
    if objective.kind == "gradient_penalty":
        return f"λ = {o.penalty:g}"
    return "-"


def results_table(results: dict[str, list[dict[str, float]]], settings: dict[str, str]) -> str:
    """Markdown: one row per objective, mean ± half range over its runs of each measure."""
    header = ["objective", "settings", "seeds", *(column for column, _ in MEASURES)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, runs in results.items():
        cells = []
        for column, _ in MEASURES:
            percent = column == "well-formed samples"
            cells.append(sweeps.format_cell([run[column] for run in runs], digits=1 if percent else 3, percent=percent))
        lines.append("| " + " | ".join([name, settings[name], str(len(runs)), *cells]) + " |")
    return "\n".join(lines)


def oracle_entropy(num: int = 1000) -> float:
    """The oracle's NLL of `num` of its own samples, nats/token: what a perfect model's samples
    score. Any seed would do (it estimates the oracle's entropy rate); 3 is no split's."""
    oracle = make_oracle()
    return float(np.mean(oracle_nll(oracle, oracle_sample(oracle, num, seed=3))))


def run_dir(workdir: str, name: str, seed: int) -> str:
    return os.path.join(workdir, f"{name}-seed{seed}")


def sweep(base: Config, names: list[str], seeds: list[int], workdir: str) -> dict[str, list[dict[str, float]]]:
    """Trains (or reads) every run, one after another; returns each objective's measures per seed."""
    results: dict[str, list[dict[str, float]]] = {}
    for name in names:
        for seed in seeds:
            directory = run_dir(workdir, name, seed)
            summary = sweeps.trained_summary(run_config(base, name, seed), directory, f"{name} seed {seed}")
            results.setdefault(name, []).append(measures(summary))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join("runs", "oracle_objectives"))
    parser.add_argument("--seeds", default="0,1", help="train.seed values, comma-separated")
    parser.add_argument("--steps", type=int, default=None, help=f"train steps per run (default {DEFAULT_STEPS})")
    parser.add_argument("--objectives", default=",".join(OBJECTIVES))
    parser.add_argument("--quick", action="store_true", help="tiny model and data: a smoke test")
    sweeps.add_results_argument(parser)
    args = parser.parse_args(argv)
    seeds, names = sweeps.parse_seeds(args.seeds), sweeps.parse_names(args.objectives, OBJECTIVES, "--objectives")
    steps = args.steps if args.steps is not None else QUICK_STEPS if args.quick else DEFAULT_STEPS
    if steps < 2:
        raise ValueError(f"--steps must be >= 2, got {steps}")
    base = quick_config(steps) if args.quick else get_config(steps)
    results = sweep(base, names, seeds, args.workdir)
    settings = {name: describe(objective_config(name, base.train.steps)) for name in names}
    table = results_table(results, settings)
    entropy = oracle_entropy()
    note = (
        f"{steps} steps of {base.train.batch_size} × {base.data.seq_len} tokens per run; mean ± half the "
        f"range over seeds {', '.join(map(str, seeds))} (train.seed; the oracle corpus is fixed). NLLs in "
        f"nats/token; the oracle NLL counts oracle tokens, the test NLL also each line's EOS. A perfect "
        f"model would score the oracle's NLL of its own samples, {entropy:.3f}, and a test NLL of about "
        f"{entropy * (SENTENCE - 1) / SENTENCE:.3f} (the EOS after 20 tokens is certain)."
    )
    text = f"{table}\n\n{note}\n"
    figures = {"per_seed": {name: dict(zip(seeds, runs)) for name, runs in results.items()}, "settings": settings}
    figures["oracle_nll_of_its_own_samples"] = entropy
    run_dirs = [run_dir(args.workdir, name, seed) for name in names for seed in seeds]
    sweeps.publish(
        "oracle_objectives",
        text,
        args.workdir,
        run_dirs,
        figures,
        sweeps.results_dir(args.results_dir, args.workdir, args.quick),
    )


if __name__ == "__main__":
    main()
