"""Masked-LM (BERT) against ELECTRA pre-training of a Transformer encoder, each then starting the
encoder of the gettext en→de Transformer encoder–decoder; a random init is the control.

One (variant, seed) cell per process, then the tables from the finished runs:

    SEQJAX_DATA=/path/to/corpora python experiments/pretrained_encoders.py --variants electra --seeds 0 \
        --workdir-root runs/pretrained_encoders
    python experiments/pretrained_encoders.py --report --seeds 0,1,2 --workdir-root runs/pretrained_encoders

Variants: masked_lm and electra pre-train an encoder (`--pretrain-steps`) and fine-tune the
translation model from it; random fine-tunes from a random encoder. A cell's seed is both its
pre-training and its fine-tuning train.seed. Pre-training reads the English side of the gettext
train split (`mt/gettext-en-de/train.en`, dev.en for validation) in rows of 64 BPE tokens cut
from the concatenated lines, with the encoder of `gettext_transformer.py` (3 pre-LN layers,
d_model 256, 4 heads, d_ff 1024) with rotary positions, which every fine-tuned model shares (with
sinusoidal positions small encoders stay at the unigram plateau, and ELECTRA's discriminator at its
base rate, far longer: RESULTS.md). ELECTRA's generator is one block (the discriminator has three)
`--generator-width` as wide: Clark et al. 2020 keep the generator at the discriminator's depth and
shrink only its width (to 1/4 to 1/2), so this generator is smaller in depth as well. Both
pre-trainings get the same steps of the same batches (equal tokens); ELECTRA's step costs more
(generator and discriminator), its wall time is reported beside. Each fine-tuning run is
`gettext_transformer.py` at `--finetune-steps` steps (its schedule scaled to them), started with
`train.init_encoder_from`. The report gives mean ± half the range over seeds of the test
masked-token perplexity, the ELECTRA discriminator's detection metrics at each evaluation of
pre-training (every quarter of `--pretrain-steps` on dev, then test: the generator's masked-token
perplexity, AUC, loss beside the base rate's, accuracy beside answering "original" everywhere,
precision and recall), and test BLEU (greedy), ROUGE-L and perplexity of each fine-tuned model next
to copy-the-source; it also writes WORKDIR_ROOT/table.md, and the tables with the runs' records
experiments/results/pretrained_encoders.json and .md (`--results-dir` elsewhere). `--pretrain-set`
and `--finetune-set` add config overrides (smoke tests).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_transformer  # noqa: E402
import sweeps  # noqa: E402
from corpora import split_paths  # noqa: E402

from seqjax import config as config_lib  # noqa: E402
from seqjax.config import Config, DataConfig, HeadConfig, OptimConfig, TrainConfig  # noqa: E402
from seqjax.models.encoders.electra import ElectraModelOptions  # noqa: E402
from seqjax.objectives import ObjectiveConfig  # noqa: E402

PRETRAINING = ("masked_lm", "electra")
VARIANTS = ("random", *PRETRAINING)


def pretraining_config(kind: str, steps: int, generator_width: float = 0.25) -> Config:
    """The encoder-only run of `kind` (masked_lm | electra) on the English side of gettext."""
    english = split_paths("mt/gettext-en-de", ".en", valid="dev")
    data = DataConfig(kind="text", **english, tokenizer="bpe", vocab_size=8000, seq_len=64)
    encoder = dataclasses.replace(gettext_transformer.get_config().model, positions="rope")
    if kind == "masked_lm":
        model = dataclasses.replace(encoder, kind="transformer_encoder")
    else:
        model = dataclasses.replace(encoder, kind="electra").with_options(
            ElectraModelOptions(generator_width=generator_width)
        )
    return Config(
        data=data,
        model=model,
        head=HeadConfig(kind="full", tied=True),
        objective=ObjectiveConfig(kind=kind),
        optim=OptimConfig(learning_rate=1e-3, warmup_steps=min(200, steps // 5), schedule="cosine"),
        train=TrainConfig(
            steps=steps, batch_size=64, eval_every=max(steps // 4, 1), checkpoint_every=steps, log_every=50
        ),
    )


def finetuning_config(steps: int, encoder: str) -> Config:
    """gettext_transformer.py with rotary positions (those its encoder was pre-trained with) at `steps`
    steps, its encoder from the run in `encoder` ('' = random)."""
    base = gettext_transformer.get_config()
    base = dataclasses.replace(base, model=dataclasses.replace(base.model, positions="rope"))
    optim = dataclasses.replace(base.optim, warmup_steps=min(base.optim.warmup_steps, steps // 5))
    train = dataclasses.replace(
        base.train, steps=steps, eval_every=0, checkpoint_every=steps, num_printed_samples=0, init_encoder_from=encoder
    )
    return dataclasses.replace(base, optim=optim, train=train)


def test_scores(run_dir: str) -> dict[str, float]:
    """Greedy test BLEU / ROUGE-L with copy-the-source, and test perplexity, cached in scores.json."""
    from seqjax.training.features.generation import DecodeOptions, translate
    from seqjax.training.saved.run import Run

    path = os.path.join(run_dir, "scores.json")
    if not os.path.isfile(path):
        restored = Run.open(run_dir).restore()
        exp, state = restored.exp, restored.state
        report = translate(exp, state.params, "test", options=DecodeOptions(), echo=lambda _: None)
        with open(os.path.join(run_dir, "summary.json")) as f:
            perplexity = json.load(f)["test"]["token_perplexity"]
        scores = {k: report[k] for k in ("bleu", "rougeL", "copy_bleu", "copy_rougeL")} | {"perplexity": perplexity}
        with open(path, "w") as f:
            json.dump(scores, f, indent=2)
    with open(path) as f:
        saved: dict[str, float] = json.load(f)
    return saved


def seconds(run_dir: str) -> float:
    with open(os.path.join(run_dir, "train_seconds.json")) as f:
        elapsed: float = json.load(f)["seconds"]
    return elapsed


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Where the cells live and how their configs are made from the flags."""

    root: str
    pretrain_steps: int
    finetune_steps: int
    generator_width: float
    pretrain_sets: tuple[str, ...] = ()
    finetune_sets: tuple[str, ...] = ()

    def pretrain_dir(self, kind: str, seed: int) -> str:
        return os.path.join(self.root, f"pretrain-{kind}-seed{seed}")

    def finetune_dir(self, variant: str, seed: int) -> str:
        return os.path.join(self.root, f"finetune-{variant}-seed{seed}")

    def pretrain_config(self, kind: str, seed: int) -> Config:
        base = pretraining_config(kind, self.pretrain_steps, self.generator_width)
        return config_lib.override(base, [*self.pretrain_sets, f"train.seed={seed}"])

    def finetune_config(self, variant: str, seed: int) -> Config:
        encoder = "" if variant == "random" else self.pretrain_dir(variant, seed)
        base = finetuning_config(self.finetune_steps, encoder)
        return config_lib.override(base, [*self.finetune_sets, f"train.seed={seed}"])

    def run_cell(self, variant: str, seed: int) -> None:
        """Pre-trains (unless random) and fine-tunes the cell, then scores its test translations."""
        if variant != "random":
            sweeps.trained_summary(
                self.pretrain_config(variant, seed), self.pretrain_dir(variant, seed), f"{variant} {seed}"
            )
        run_dir = self.finetune_dir(variant, seed)
        sweeps.trained_summary(self.finetune_config(variant, seed), run_dir, f"fine-tuning from {variant} {seed}")
        test_scores(run_dir)

    def finished(self, variant: str, seed: int) -> tuple[dict | None, dict] | None:
        """(pre-training test results or None for random, fine-tuning scores) of a finished cell, else None."""
        pretrained = None
        if variant != "random":
            summary = sweeps.finished_summary(self.pretrain_dir(variant, seed), self.pretrain_config(variant, seed))
            if summary is None:
                return None
            pretrained = dict(summary["test"], seconds=seconds(self.pretrain_dir(variant, seed)))
        run_dir = self.finetune_dir(variant, seed)
        if sweeps.finished_summary(run_dir, self.finetune_config(variant, seed)) is None:
            return None
        if not os.path.isfile(os.path.join(run_dir, "scores.json")):
            return None
        return pretrained, test_scores(run_dir)


# The ELECTRA table over pre-training steps: (column, metric of an evaluation, digits); "always
# original" is the accuracy of answering "original" everywhere, 1 − the base rate.
STEP_COLUMNS = (
    ("generator masked-token ppl", "token_perplexity", 1),
    ("AUC", "discriminator_auc", 3),
    ("loss", "discriminator_loss", 3),
    ("base rate's loss", "discriminator_base_rate_loss", 3),
    ("accuracy", "discriminator_accuracy", 3),
    ("always original", "always_original", 3),
    ("precision", "discriminator_precision", 3),
    ("recall", "discriminator_recall", 3),
)


def evaluations(run_dir: str) -> dict[str, dict[str, float]]:
    """The evaluations of a finished pre-training run, in order: "dev, STEP" for each of its
    validation evaluations (metrics.jsonl; the last record of a step), then "test, STEPS"
    (summary.json), each with `always_original` (1 − the discriminator's base rate) added."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        dev = {r["step"]: r for r in map(json.loads, f) if r.get("split") == "valid"}
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    found = {f"dev, {step:,}": record for step, record in sorted(dev.items())}
    found[f"test, {summary['steps']:,}"] = summary["test"]
    return {
        key: dict(m, always_original=1.0 - m["discriminator_base_rate"]) if "discriminator_base_rate" in m else m
        for key, m in found.items()
    }


def electra_steps_table(runs: list[dict[str, dict[str, float]]]) -> list[str]:
    """Markdown: one row per evaluation that every run in `runs` (`evaluations` of each seed) has,
    mean ± spread over the runs of each of STEP_COLUMNS."""
    names = [name for name in runs[0] if all(name in r for r in runs)]
    lines = [
        f"| ELECTRA, split and step ({len(runs)} seeds) | " + " | ".join(c for c, _, _ in STEP_COLUMNS) + " |",
        "|---" * (len(STEP_COLUMNS) + 1) + "|",
    ]
    for name in names:
        cells = [
            sweeps.format_cell([r[name][key] for r in runs], digits) if all(key in r[name] for r in runs) else "-"
            for _, key, digits in STEP_COLUMNS
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def report(sweep: Sweep, seeds: list[int]) -> tuple[str, list[str], dict]:
    """(the tables of the finished cells, the unfinished ones named under them; the finished runs'
    directories; the figures: each variant's pre-training test results and fine-tuning scores per
    seed, and ELECTRA's evaluations over pre-training per seed)."""
    finished = {v: {s: c for s in seeds if (c := sweep.finished(v, s)) is not None} for v in VARIANTS}
    cells = {v: list(found.values()) for v, found in finished.items()}
    missing = [f"{v}-seed{s}" for v in VARIANTS for s in seeds if s not in finished[v]]
    run_dirs = [
        d
        for v in VARIANTS
        for s in finished[v]
        for d in ([] if v == "random" else [sweep.pretrain_dir(v, s)]) + [sweep.finetune_dir(v, s)]
    ]
    electra = {s: evaluations(sweep.pretrain_dir("electra", s)) for s in finished["electra"]}
    data = sweep.pretrain_config("masked_lm", 0)
    lines = [
        f"| pre-training, {sweep.pretrain_steps} steps × {data.train.batch_size * data.data.seq_len:,} tokens | seeds "
        "| test masked-token perplexity (the generator's, for ELECTRA) | wall time (min) |",
        "|---|---|---|---|",
    ]
    for kind in PRETRAINING:
        if cells[kind]:
            runs = [p for p, _ in cells[kind] if p is not None]
            ppl = sweeps.format_cell([p["token_perplexity"] for p in runs], 1)
            lines.append(
                f"| {kind} | {len(runs)} | {ppl} | {sweeps.format_cell([p['seconds'] / 60 for p in runs], 1)} |"
            )
    if electra:
        lines += ["", *electra_steps_table(list(electra.values()))]
    lines += [
        "",
        f"| encoder of the en→de Transformer ({sweep.finetune_steps} steps) | seeds | test BLEU, greedy "
        "| test ROUGE-L | test perplexity |",
        "|---|---|---|---|---|",
    ]
    first = next((scores for runs in cells.values() for _, scores in runs), None)
    if first is not None:
        lines.append(f"| copy the source | - | {first['copy_bleu']:.2f} | {first['copy_rougeL']:.3f} | - |")
    for variant in VARIANTS:
        if cells[variant]:
            scores = [s for _, s in cells[variant]]
            measures = [
                sweeps.format_cell([s[m] for s in scores], d)
                for m, d in (("bleu", 2), ("rougeL", 3), ("perplexity", 1))
            ]
            lines.append(f"| {variant} | {len(scores)} | {' | '.join(measures)} |")
    figures = {
        "per_seed": {
            v: {s: {"pretraining_test": p, "finetuned_test": f} for s, (p, f) in found.items()}
            for v, found in finished.items()
        },
        "electra_evaluations_per_seed": electra,
    }
    return sweeps.table_text(lines, missing), run_dirs, figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sweeps.add_grid_arguments(parser, "pretrained_encoders", VARIANTS, "train.seed of pre-training and fine-tuning")
    parser.add_argument("--pretrain-steps", type=int, default=2000)
    parser.add_argument("--finetune-steps", type=int, default=1000)
    parser.add_argument("--generator-width", type=float, default=0.25, help="ELECTRA's generator width, a fraction")
    parser.add_argument("--pretrain-set", nargs="*", default=[], help="config overrides KEY=VALUE of pre-training")
    parser.add_argument("--finetune-set", nargs="*", default=[], help="config overrides KEY=VALUE of fine-tuning")
    parser.add_argument("--report", action="store_true", help="print the tables of finished runs, train nothing")
    sweeps.add_results_argument(parser)
    args = parser.parse_args(argv)
    for flag in ("pretrain_steps", "finetune_steps"):
        if getattr(args, flag) < 10:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 10, got {getattr(args, flag)}")
    seeds, variants = sweeps.parse_seeds(args.seeds), sweeps.parse_names(args.variants, VARIANTS, "--variants")
    sweep = Sweep(
        args.workdir_root,
        args.pretrain_steps,
        args.finetune_steps,
        args.generator_width,
        tuple(args.pretrain_set),
        tuple(args.finetune_set),
    )
    if not args.report:
        for variant in variants:
            for seed in seeds:
                sweep.run_cell(variant, seed)
    text, run_dirs, figures = report(sweep, seeds)
    results = sweeps.results_dir(args.results_dir, args.workdir_root)
    sweeps.publish("pretrained_encoders", text, args.workdir_root, run_dirs, figures, results)


if __name__ == "__main__":
    main()
