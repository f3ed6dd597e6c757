"""Masked-LM (BERT) against ELECTRA pre-training of a Transformer encoder, each then starting the
encoder of the gettext en→de Transformer encoder–decoder; a random init is the control.

    SEQJAX_DATA=/path/to/corpora python experiments/pretrained_encoders.py [--workdir runs/pretrained_encoders]
        [--mlm-steps 300] [--electra-steps 180] [--finetune-steps 500]

Pre-training reads the English side of the gettext train split (`mt/gettext-en-de/train.en`,
dev.en for validation) in rows of 64 BPE tokens cut from the concatenated lines (BERT's rows
also span sentences; the translation encoder then reads one line at a time), with the encoder of
`gettext_transformer.py` (3 pre-LN layers, d_model 256, 4 heads, d_ff 1024). Both runs get
the same wall time on one core: ELECTRA's step also runs a one-block generator and the
discriminator, so it takes fewer steps (the defaults; the step times are in each run's
train_seconds.json). Each fine-tuning run is `gettext_transformer.py` at `--finetune-steps`
steps (its schedule scaled to them), started from the pre-trained encoder with
`train.init_encoder_from`, or from scratch. The script prints test BLEU (greedy), ROUGE-L
and perplexity next to copy-the-source, and writes them to WORKDIR/table.md; finished runs
are read, not retrained.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_transformer  # noqa: E402
from sweeps import publish_table, trained_summary  # noqa: E402

from seqjax.config import Config, DataConfig, HeadConfig, OptimConfig, TrainConfig  # noqa: E402
from seqjax.objectives import ObjectiveConfig  # noqa: E402

PRETRAINING = ("masked_lm", "electra")


def pretraining_config(kind: str, steps: int) -> Config:
    """The encoder-only run of `kind` (masked_lm | electra) on the English side of gettext."""
    data = DataConfig(
        kind="text",
        train="mt/gettext-en-de/train.en",
        valid="mt/gettext-en-de/dev.en",
        test="mt/gettext-en-de/test.en",
        tokenizer="bpe",
        vocab_size=8000,
        seq_len=64,
    )
    encoder = gettext_transformer.get_config().model
    model = dataclasses.replace(encoder, kind="transformer_encoder" if kind == "masked_lm" else "electra")
    return Config(
        data=data,
        model=model,
        head=HeadConfig(kind="full", tied=True),
        objective=ObjectiveConfig(kind=kind),
        optim=OptimConfig(learning_rate=1e-3, warmup_steps=min(200, steps // 5), schedule="cosine"),
        train=TrainConfig(steps=steps, batch_size=64, eval_every=0, checkpoint_every=steps, log_every=50),
    )


def finetuning_config(steps: int, encoder: str) -> Config:
    """gettext_transformer.py at `steps` steps, its encoder from the run in `encoder` ('' = random)."""
    base = gettext_transformer.get_config()
    optim = dataclasses.replace(base.optim, warmup_steps=min(base.optim.warmup_steps, steps // 5))
    train = dataclasses.replace(
        base.train, steps=steps, eval_every=0, checkpoint_every=steps, num_printed_samples=0, init_encoder_from=encoder
    )
    return dataclasses.replace(base, optim=optim, train=train)


def test_scores(run_dir: str) -> dict:
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
        return json.load(f)


def seconds(run_dir: str) -> float:
    with open(os.path.join(run_dir, "train_seconds.json")) as f:
        return json.load(f)["seconds"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join("runs", "pretrained_encoders"))
    parser.add_argument("--mlm-steps", type=int, default=300)
    parser.add_argument("--electra-steps", type=int, default=180)
    parser.add_argument("--finetune-steps", type=int, default=500)
    args = parser.parse_args(argv)
    for flag in ("mlm_steps", "electra_steps", "finetune_steps"):
        if getattr(args, flag) < 10:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 10, got {getattr(args, flag)}")
    pretrained = {}
    for kind, steps in zip(PRETRAINING, (args.mlm_steps, args.electra_steps), strict=True):
        run_dir = os.path.join(args.workdir, kind)
        summary = trained_summary(pretraining_config(kind, steps), run_dir, f"pre-training {kind}")
        pretrained[kind] = (run_dir, summary["test"]["token_perplexity"], seconds(run_dir), steps)
    rows = []
    for name, encoder in (("random init", ""), *((kind, pretrained[kind][0]) for kind in PRETRAINING)):
        run_dir = os.path.join(args.workdir, "finetune-" + name.replace(" ", "_"))
        trained_summary(finetuning_config(args.finetune_steps, encoder), run_dir, f"fine-tuning from {name}")
        rows.append((name, test_scores(run_dir), seconds(run_dir)))
    lines = [
        "| pre-training | steps | wall time | test masked-token perplexity |",
        "|---|---|---|---|",
        *(f"| {k} | {p[3]} | {p[2] / 60:.1f} min | {p[1]:.2f} |" for k, p in pretrained.items()),
        "",
        f"| encoder of the en→de Transformer ({args.finetune_steps} steps) | test BLEU, greedy | test ROUGE-L "
        "| test perplexity | fine-tuning wall time |",
        "|---|---|---|---|---|",
        f"| copy the source | {rows[0][1]['copy_bleu']:.2f} | {rows[0][1]['copy_rougeL']:.3f} | - | - |",
        *(
            f"| {n} | {s['bleu']:.2f} | {s['rougeL']:.3f} | {s['perplexity']:.1f} | {t / 60:.1f} min |"
            for n, s, t in rows
        ),
    ]
    publish_table("\n".join(lines) + "\n", args.workdir)


if __name__ == "__main__":
    main()
