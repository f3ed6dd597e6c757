"""Back-translation on gettext en→de: half of the train pairs kept as parallel data, the German
side of the other half as monolingual text, synthetic English sources from beam search against
sampling (Edunov et al. 2018), next to the half-data model, the model trained on all real pairs
(the upper bound) and copy-the-source.

The run has stages, each a command that finds the work of the stages before it done and skips
what it finished before (so a stage's cells can run as separate processes, in this order):

    export SEQJAX_DATA=/path/to/corpora
    python experiments/back_translation.py --stage corpus [--mono-lines 0]     # seconds, CPU
    python experiments/back_translation.py --stage backward                    # one de→en model
    python experiments/back_translation.py --stage synthetic --variants beam   # and: --variants sampled
    python experiments/back_translation.py --stage forward --variants half --seeds 0   # one per cell
    python experiments/back_translation.py --report                            # trains nothing

(every command with the same `--workdir`, default runs/back_translation, and `--steps`, default
2000; the workdir is made absolute, since the corpus paths under it go into the runs' configs). The
train split (`mt/gettext-en-de/train`) is cut in two halves by line order: the first half's
pairs are the parallel data, the German of the second half (all of it, or its first
`--mono-lines` lines) the monolingual text; both are written under WORKDIR/corpus. Every model
is the Transformer of `gettext_transformer.py` (3 + 3 layers, d_model 256) trained `--steps`
steps of 64 pairs: the backward de→en model (seed 0) on the parallel half, which back-translates
the monolingual text once with beam search and once by sampling; the forward en→de models, one
per (variant, seed): `half` (the parallel half), `beam` and `sampled` (the parallel half plus
those back-translations, their sources tagged `<bt>`, Caswell et al. 2019) and `all` (every
real train pair). Each forward run's test BLEU (greedy), ROUGE-L, copy-the-source BLEU and
per-word perplexity (one unit for every row, whatever BPE each run built: the test NLL over the
references' words) are written to its scores.json; `--report` prints mean ± spread over the
seeds found and the BLEU gain over `half` paired by seed, and writes WORKDIR/table.md and, with the
runs' records, experiments/results/back_translation.json and .md (back_translation_STEPS_steps.*
for other `--steps`; `--results-dir` elsewhere). A
monolingual line the backward model cannot read (more than model.max_len source tokens) stays
untranslated, blank, and its pair is left out of the synthetic corpus; PREFIX.json counts them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_transformer  # noqa: E402
import sweeps  # noqa: E402

from seqjax.config import Config  # noqa: E402
from seqjax.data.corpora.readers import read_parallel, read_texts, split_pairs  # noqa: E402
from seqjax.training.features.back_translation import combine_pairs, write_corpus  # noqa: E402
from seqjax.training.features.generation import DecodeOptions, translate_lines  # noqa: E402

TAG = "<bt>"
DEFAULT_STEPS = 2000
STAGES = ("corpus", "backward", "synthetic", "forward")
DECODINGS = {"beam": DecodeOptions(beam=2), "sampled": DecodeOptions(sample=True)}
FORWARD = ("half", "beam", "sampled", "all")
LABELS = {
    "half": "parallel half",
    "beam": "+ back-translation, beam 2",
    "sampled": "+ back-translation, sampled",
    "all": "all real pairs (upper bound)",
}


def model_config(steps: int, train: str, src: str = "en", tgt: str = "de", seed: int = 0) -> Config:
    """The gettext Transformer on the pairs of prefix `train`, `src` → `tgt`, `steps` steps."""
    base = gettext_transformer.get_config()
    return dataclasses.replace(
        base,
        data=dataclasses.replace(base.data, train=train, src=src, tgt=tgt),
        train=dataclasses.replace(
            base.train, steps=steps, seed=seed, eval_every=0, checkpoint_every=max(steps // 4, 1), num_printed_samples=0
        ),
    )


def corpus_paths(workdir: str) -> tuple[str, str]:
    """The parallel half's prefix and the monolingual German file under WORKDIR/corpus."""
    corpus = os.path.join(workdir, "corpus")
    return os.path.join(corpus, "parallel"), os.path.join(corpus, "mono.de")


def split_corpus(workdir: str, mono_lines: int) -> None:
    """Writes the parallel half and the monolingual German lines (all of the second half when
    mono_lines is 0); the monolingual file is written last, by rename: it marks the stage done."""
    parallel, mono = corpus_paths(workdir)
    if os.path.isfile(mono):
        return
    sources, targets = split_pairs(gettext_transformer.get_config().data, "train")
    half = len(sources) // 2
    write_corpus(parallel, "en", "de", (sources[:half], targets[:half]))
    lines = targets[half:] if mono_lines == 0 else targets[half : half + mono_lines]
    with open(mono + ".tmp", "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.replace(mono + ".tmp", mono)
    print(f"== corpus: {half:,} parallel pairs, {len(lines):,} monolingual lines", flush=True)


def require(path: str, stage: str) -> None:
    if not os.path.exists(path):
        raise ValueError(f"{path} is missing: run --stage {stage} first (stages run in the order {', '.join(STAGES)})")


def synthetic_prefix(workdir: str, decoding: str) -> str:
    return os.path.join(workdir, "corpus", f"bt_{decoding}")


def synthetic_corpus(workdir: str, decoding: str) -> None:
    """Back-translates the monolingual text with the backward run and writes real + tagged
    synthetic pairs; PREFIX.json, written last, marks the stage done."""
    from seqjax.training.saved.run import Run

    parallel, mono = corpus_paths(workdir)
    prefix, backward = synthetic_prefix(workdir, decoding), os.path.join(workdir, "backward")
    if os.path.isfile(prefix + ".json"):
        return
    require(os.path.join(backward, "summary.json"), "backward")
    lines = read_texts(mono)
    restored = Run.open(backward).restore()
    start = time.perf_counter()
    synthetic = translate_lines(restored.exp, restored.state.params, lines, DECODINGS[decoding])
    took = time.perf_counter() - start
    real = read_parallel(parallel, "en", "de")
    pairs = combine_pairs(real, (synthetic, lines), upsample=1, tag=TAG)
    write_corpus(prefix, "en", "de", pairs)
    made = {
        "decoding": DECODINGS[decoding].describe(),
        "lines": len(lines),
        "seconds": took,
        "blank_outputs": sum(1 for line in synthetic if not line.strip()),
        "synthetic_pairs": len(pairs[0]) - len(real[0]),
        "real_pairs": len(real[0]),
    }
    with open(prefix + ".json", "w") as f:
        json.dump(made, f)
    print(f"== back-translated {len(lines):,} lines ({DECODINGS[decoding].describe()}) in {took:.0f} s", flush=True)


def forward_train(workdir: str, variant: str) -> str:
    """The train prefix of a forward variant (its corpus stage must be done)."""
    if variant == "all":
        return "mt/gettext-en-de/train"
    if variant == "half":
        require(corpus_paths(workdir)[1], "corpus")
        return corpus_paths(workdir)[0]
    require(synthetic_prefix(workdir, variant) + ".json", f"synthetic --variants {variant}")
    return synthetic_prefix(workdir, variant)


def scores(run_dir: str) -> dict[str, Any]:
    """Greedy test BLEU / ROUGE-L with copy-the-source, and test per-word and per-token
    perplexity, of a finished run, computed once into scores.json."""
    from seqjax.training.features.generation import translate
    from seqjax.training.saved.run import Run

    path = os.path.join(run_dir, "scores.json")
    if not os.path.isfile(path):
        restored = Run.open(run_dir).restore()
        report = translate(restored.exp, restored.state.params, "test", options=DecodeOptions(), echo=lambda _: None)
        with open(os.path.join(run_dir, "summary.json")) as f:
            test = json.load(f)["test"]
        kept = {k: report[k] for k in ("bleu", "rougeL", "copy_bleu", "copy_rougeL")}
        with open(path, "w") as f:
            json.dump(kept | {k: test[k] for k in ("word_perplexity", "token_perplexity")}, f, indent=2)
    with open(path) as f:
        saved: dict[str, Any] = json.load(f)
    return saved


def forward_dir(workdir: str, variant: str, seed: int) -> str:
    return os.path.join(workdir, f"forward-{variant}-seed{seed}")


def run_stage(args: argparse.Namespace) -> None:
    if args.stage == "corpus":
        split_corpus(args.workdir, args.mono_lines)
    elif args.stage == "backward":
        parallel, mono = corpus_paths(args.workdir)
        require(mono, "corpus")
        cfg = model_config(args.steps, parallel, "de", "en")
        sweeps.trained_summary(cfg, os.path.join(args.workdir, "backward"), "backward de->en on the parallel half")
        scores(os.path.join(args.workdir, "backward"))
    elif args.stage == "synthetic":
        for decoding in sweeps.parse_names(args.variants, tuple(DECODINGS), "--variants"):
            synthetic_corpus(args.workdir, decoding)
    else:
        for variant in sweeps.parse_names(args.variants, FORWARD, "--variants"):
            for seed in sweeps.parse_seeds(args.seeds):
                run_dir = forward_dir(args.workdir, variant, seed)
                cfg = model_config(args.steps, forward_train(args.workdir, variant), seed=seed)
                sweeps.trained_summary(cfg, run_dir, f"forward en->de: {LABELS[variant]}, seed {seed}")
                scores(run_dir)


def finished_scores(workdir: str, steps: int, variant: str) -> dict[int, dict]:
    """Seed -> scores of the finished forward runs of `variant` (those with a scores.json)."""
    found = {}
    for name in sorted(os.listdir(workdir)) if os.path.isdir(workdir) else []:
        prefix = f"forward-{variant}-seed"
        run_dir = os.path.join(workdir, name)
        if name.startswith(prefix) and os.path.isfile(os.path.join(run_dir, "scores.json")):
            seed = int(name[len(prefix) :])
            cfg = model_config(steps, forward_train(workdir, variant), seed=seed)
            if sweeps.finished_summary(run_dir, cfg) is not None:
                found[seed] = scores(run_dir)
    return found


def report(workdir: str, steps: int) -> tuple[str, list[str], dict]:
    """(the table of the finished runs: mean ± spread over seeds, the BLEU gain over `half` by seed;
    the finished runs' directories, the backward one's first; the figures: the backward model's
    scores, each back-translation's record and each forward variant's scores per seed)."""
    rows = {variant: finished_scores(workdir, steps, variant) for variant in FORWARD}
    half = rows["half"]
    lines, run_dirs = [], []
    figures: dict = {"forward_per_seed": rows, "backward": None, "back_translations": {}}
    backward = os.path.join(workdir, "backward", "scores.json")
    if os.path.isfile(backward):
        run_dirs.append(os.path.dirname(backward))
        with open(backward) as f:
            b = json.load(f)
        figures["backward"] = b
        lines += [
            f"Backward de→en model (seed 0): test BLEU {b['bleu']:.2f} (copy-the-source {b['copy_bleu']:.2f}).",
            "",
        ]
    for decoding in DECODINGS:
        path = synthetic_prefix(workdir, decoding) + ".json"
        if os.path.isfile(path):
            with open(path) as f:
                made = json.load(f)
            figures["back_translations"][decoding] = made
            blank = f", {made['blank_outputs']:,} left blank" if "blank_outputs" in made else ""
            lines += [
                f"Back-translation ({made['decoding']}): {made['lines']:,} lines in {made['seconds']:.0f} s{blank}.",
                "",
            ]
    lines += [
        "| forward en→de model | seeds | test BLEU, greedy | copy-the-source BLEU | BLEU gain over the half, by seed "
        "| test ROUGE-L | test perplexity per word |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant, found in rows.items():
        if not found:
            lines.append(f"| {LABELS[variant]} | none finished | | | | | |")
            continue
        paired = [found[s]["bleu"] - half[s]["bleu"] for s in found if s in half]
        gain = sweeps.format_cell(paired, 2) if paired and variant != "half" else "-"
        cells = [sweeps.format_cell([s[k] for s in found.values()], d) for k, d in (("bleu", 2), ("copy_bleu", 2))]
        rest = [
            sweeps.format_cell([s[k] for s in found.values()], d) for k, d in (("rougeL", 3), ("word_perplexity", 1))
        ]
        seeds = ", ".join(str(s) for s in sorted(found))
        lines.append(f"| {LABELS[variant]} | {seeds} | {cells[0]} | {cells[1]} | {gain} | {rest[0]} | {rest[1]} |")
    run_dirs += [forward_dir(workdir, variant, seed) for variant, found in rows.items() for seed in sorted(found)]
    return "\n".join(lines) + "\n", run_dirs, figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join("runs", "back_translation"))
    parser.add_argument("--stage", choices=STAGES)
    parser.add_argument("--report", action="store_true", help="print the table of the finished runs; train nothing")
    parser.add_argument("--variants", default="", help=f"synthetic: beam,sampled; forward: {','.join(FORWARD)}")
    parser.add_argument("--seeds", default="0", help="forward: train.seed of each run, comma-separated")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--mono-lines", type=int, default=0, help="corpus: monolingual lines (0: the whole half)")
    sweeps.add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.steps < 10 or args.mono_lines < 0:
        raise ValueError(f"need --steps >= 10 and --mono-lines >= 0, got {args.steps} and {args.mono_lines}")
    if args.report == (args.stage is not None):
        raise ValueError("give exactly one of --stage and --report")
    # The corpus paths go into the runs' configs, where a relative path would be read under $SEQJAX_DATA.
    args.workdir = os.path.abspath(args.workdir)
    if args.report:
        text, run_dirs, figures = report(args.workdir, args.steps)
        name = "back_translation" if args.steps == DEFAULT_STEPS else f"back_translation_{args.steps}_steps"
        sweeps.publish(name, text, args.workdir, run_dirs, figures, sweeps.results_dir(args.results_dir, args.workdir))
    else:
        run_stage(args)


if __name__ == "__main__":
    main()
