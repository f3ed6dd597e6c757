"""The VAE language model (Bowman et al. 2016) on the synthetic grammar's sentences, character
level: one LSTM layer each for encoder and decoder, z feeding the decoder's initial state only
(as in the paper), the full softmax; a row is one whole sentence (and its `</s>`) in training,
evaluation and interpolation.

`get_config()` is the annealed run (`seqjax train --config experiments/vae_grammar.py`). The
sweep trains each variant with each seed, one run per (variant, seed) in WORKDIR/<variant>-seed<S>:

    python experiments/vae_grammar.py --variants annealed --seeds 0 [--workdir runs/vae_grammar]
    python experiments/vae_grammar.py --report     # the table of the finished runs; trains nothing

  plain      β = 1 from the first step, no word dropout (the collapse baseline)
  annealed   β from 0 to 1 on a sigmoid over the first half of training, word dropout 0.4
  free_bits  annealed, and free bits: each z dimension's batch-mean KL below 0.25 nats is free

After training, a cell decodes greedily at 7 evenly spaced points between the posterior means of
three pairs of test sentences (the homotopies of the paper's §5) into WORKDIR/<run>/homotopies.json.
The table gives, mean ± spread over seeds, the test KL per sentence, the reconstruction gap (the
decoder's NLL of a sentence given z from the prior less given z from its posterior: ≈ 0 when the
decoder ignores z; not bounded by the KL), the bounds, the grammatical share of sentences sampled from
the prior, and per homotopy the distinct sentences and their grammatical share; then one
homotopy of each variant in full; `--report` also writes them, with the runs' records, to
experiments/results/vae_grammar.json and .md. `--quick` shrinks every run to a CPU smoke test (its
report goes to WORKDIR).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps  # noqa: E402

from seqjax.config import Config, DataConfig, ModelConfig, OptimConfig, TrainConfig  # noqa: E402
from seqjax.models.language_models.vae import RNNVAEOptions  # noqa: E402
from seqjax.objectives import VAE, ObjectiveConfig  # noqa: E402

STEPS = 6000
VARIANTS = {
    "plain": dict(schedule="constant", word_dropout=0.0),
    "annealed": dict(schedule="sigmoid", word_dropout=0.4),
    "free_bits": dict(schedule="sigmoid", word_dropout=0.4, free_bits=0.25),
}
PAIRS = ((0, 1), (2, 3), (4, 5))  # test sentences whose homotopies are decoded
POINTS = 7
QUICK = dict(num_train=256, num_eval=16, d_model=16, latent_size=4, steps=4, batch_size=8)


def get_config(steps: int = STEPS) -> Config:
    """The annealed run: 100,000 training sentences (the longest has 115 characters with its
    `</s>`), rows of 128 characters, d_model 256, z of 32, β annealed over `steps` // 2 steps."""
    return Config(
        data=DataConfig(kind="synthetic", task="grammar", seq_len=128, num_train=100000, num_eval=500),
        model=ModelConfig(
            kind="rnn_vae", cell="lstm", d_model=256, layers=1, dropout=0.0, groups=(RNNVAEOptions(latent_size=32),)
        ),
        objective=ObjectiveConfig(
            kind="vae", groups=(VAE(beta=1.0, schedule="sigmoid", anneal_steps=steps // 2, word_dropout=0.4),)
        ),
        optim=OptimConfig(learning_rate=1e-3, warmup_steps=100),
        train=TrainConfig(
            steps=steps,
            batch_size=64,
            eval_every=steps // 4,
            checkpoint_every=steps // 4,
            log_every=100,
            printed_sample_len=128,
        ),
    )


def run_config(variant: str, seed: int, steps: int, quick: bool) -> Config:
    """The variant's config with train.seed = seed (the corpus, data.seed, stays fixed)."""
    base = get_config(QUICK["steps"] if quick else steps)
    vae = dataclasses.replace(base.objective.group("vae"), **VARIANTS[variant])
    cfg = dataclasses.replace(
        base,
        objective=base.objective.with_options(vae),
        train=dataclasses.replace(base.train, seed=seed),
    )
    if quick:
        cfg = dataclasses.replace(
            cfg,
            data=dataclasses.replace(cfg.data, num_train=QUICK["num_train"], num_eval=QUICK["num_eval"]),
            model=dataclasses.replace(cfg.model, d_model=QUICK["d_model"]).with_options(
                dataclasses.replace(cfg.model.group("rnn_vae"), latent_size=QUICK["latent_size"])
            ),
            train=dataclasses.replace(cfg.train, batch_size=QUICK["batch_size"], log_every=1, eval_every=0),
        )
    return cfg


def homotopies(run_dir: str) -> list[dict[str, Any]]:
    """Greedy decodes at POINTS points between the posterior means of each pair of PAIRS' test
    sentences, with their distinct count and grammatical share; computed once into homotopies.json."""
    from seqjax.data import is_grammatical
    from seqjax.data.tokenizers.vocab import EOS_ID
    from seqjax.training.features.generation import DecodeOptions
    from seqjax.training.features.interpolation import interpolate_texts
    from seqjax.training.saved.run import Run

    path = os.path.join(run_dir, "homotopies.json")
    if not os.path.isfile(path):
        restored = Run.open(run_dir).restore(["test"])
        exp, params = restored.exp, restored.state.params
        stream = np.asarray(exp.stream.splits["test"])
        lines = [
            exp.tokenizer.decode(line[:-1].tolist()) for line in np.split(stream, np.flatnonzero(stream == EOS_ID) + 1)
        ]
        found = []
        for first, second in PAIRS:
            points = interpolate_texts(
                exp,
                params,
                lines[first],
                lines[second],
                num=POINTS,
                max_len=exp.cfg.data.seq_len,
                options=DecodeOptions(),
            )
            texts = [text for _, text in points]
            found.append(
                {
                    "first": lines[first],
                    "second": lines[second],
                    "points": points,
                    "distinct": len(set(texts)),
                    "grammatical": float(np.mean([is_grammatical(t) for t in texts])),
                }
            )
        with open(path, "w") as f:
            json.dump(found, f, indent=2)
    with open(path) as f:
        saved: list[dict[str, Any]] = json.load(f)
    return saved


def train_kl(run_dir: str) -> list[float]:
    """The logged training KL per sentence at the logs nearest ¼, ½, ¾ and the end of training."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [r for r in map(json.loads, f) if r.get("split") == "train" and "kl" in r]
    last = records[-1]["step"]
    return [min(records, key=lambda r: abs(r["step"] - last * q / 4))["kl"] for q in (1, 2, 3, 4)]


def measures(run_dir: str, summary: dict) -> dict[str, float]:
    test, found = summary["test"], homotopies(run_dir)
    return {
        "kl": test["kl"],
        "gap": test["reconstruction_gap"],
        "elbo": -test["elbo"],
        "bound": test["token_perplexity"],
        "grammatical": summary["samples"].get("grammatical", float("nan")),
        "distinct": float(np.mean([h["distinct"] for h in found])),
        "homotopy_grammatical": float(np.mean([h["grammatical"] for h in found])),
        **{f"train_kl_{q}": kl for q, kl in zip((1, 2, 3, 4), train_kl(run_dir))},
    }


def cell(values: list[dict[str, float]], key: str, digits: int, percent: bool = False) -> str:
    return sweeps.format_cell([v[key] for v in values], digits, percent)


def report(workdir: str, steps: int, quick: bool) -> tuple[str, list[str], dict]:
    """(the table of the finished runs under `workdir`, mean ± spread over the seeds found; those
    runs' directories; each variant's measures per seed and the homotopies shown)."""
    lines = [
        "| run | seeds | train KL per sentence at ¼ / ½ / ¾ / end (nats) | test KL per sentence | reconstruction gap, "
        "prior z − posterior z (nats per sentence) | test −ELBO per sentence | perplexity bound per char | "
        f"prior samples grammatical | distinct sentences of {POINTS} per homotopy | homotopy sentences grammatical |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    shown, run_dirs = [], []
    per_seed: dict[str, dict[int, dict[str, float]]] = {}
    for variant in VARIANTS:
        found = {}
        for name in sorted(os.listdir(workdir)) if os.path.isdir(workdir) else []:
            prefix = f"{variant}-seed"
            if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
                continue
            seed, run_dir = int(name[len(prefix) :]), os.path.join(workdir, name)
            summary = sweeps.finished_summary(run_dir, run_config(variant, seed, steps, quick))
            if summary is not None:
                found[seed] = measures(run_dir, summary)
                run_dirs.append(run_dir)
        per_seed[variant] = found
        if not found:
            lines.append(f"| {variant} | none finished |" + " |" * 8)
            continue
        values = list(found.values())

        kls = " / ".join(cell(values, f"train_kl_{q}", 2) for q in (1, 2, 3, 4))
        lines.append(
            f"| {variant} | {', '.join(map(str, sorted(found)))} | {kls} | {cell(values, 'kl', 3)} | "
            f"{cell(values, 'gap', 3)} | {cell(values, 'elbo', 2)} | {cell(values, 'bound', 3)} | "
            f"{cell(values, 'grammatical', 1, True)} | {cell(values, 'distinct', 1)} | "
            f"{cell(values, 'homotopy_grammatical', 1, True)} |"
        )
        shown.append((variant, min(found), homotopies(os.path.join(workdir, f"{variant}-seed{min(found)}"))[0]))
    for variant, seed, homotopy in shown:
        lines += [
            "",
            f"{variant}, seed {seed}: greedy decodes from {homotopy['first']!r} to {homotopy['second']!r}",
            "",
        ]
        lines += [f"    {fraction:.2f}  {text}" for fraction, text in homotopy["points"]]
    figures = {"per_seed": per_seed, "homotopies_shown": {variant: (seed, h) for variant, seed, h in shown}}
    return "\n".join(lines) + "\n", run_dirs, figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join("runs", "vae_grammar"))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--report", action="store_true", help="print the table of the finished runs; train nothing")
    parser.add_argument("--quick", action="store_true", help="tiny runs: a smoke test of every path")
    sweeps.add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.steps < 4:
        raise ValueError(f"--steps must be >= 4, got {args.steps}")
    if args.report:
        text, run_dirs, figures = report(args.workdir, args.steps, args.quick)
        sweeps.publish(
            "vae_grammar",
            text,
            args.workdir,
            run_dirs,
            figures,
            sweeps.results_dir(args.results_dir, args.workdir, args.quick),
        )
        return
    for variant in sweeps.parse_names(args.variants, tuple(VARIANTS), "--variants"):
        for seed in sweeps.parse_seeds(args.seeds):
            run_dir = os.path.join(args.workdir, f"{variant}-seed{seed}")
            sweeps.trained_summary(
                run_config(variant, seed, args.steps, args.quick), run_dir, f"{variant}, seed {seed}"
            )
            homotopies(run_dir)


if __name__ == "__main__":
    main()
