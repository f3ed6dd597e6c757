"""Back-translation on gettext en→de: half of the train pairs kept as parallel data, the German
side of the other half as monolingual text, synthetic English sources from beam search against
sampling (Edunov et al. 2018), next to the half-data model, the model trained on all real pairs
(the upper bound) and copy-the-source.

    SEQJAX_DATA=/path/to/corpora python experiments/back_translation.py [--workdir runs/back_translation]
        [--steps 1500] [--mono-lines 8000] [--beam 2]

The train split (`mt/gettext-en-de/train`) is cut in two halves by line order: the first half's
pairs are the parallel data, the German of the second half's first `--mono-lines` lines the
monolingual text; both are written under WORKDIR/corpus. Every model is the Transformer of
`gettext_transformer.py` made smaller for this CPU budget (2 + 2 layers, d_model 128, 4 heads,
d_ff 512) and trained `--steps` steps of 64 pairs: the backward de→en model and the forward
en→de models on (a) the parallel half, (b) the parallel half plus the beam back-translations,
(c) the parallel half plus the sampled back-translations (unrestricted sampling at temperature
1), (d) every real train pair. Synthetic sources are tagged `<bt>` (Caswell et al. 2019). The
script prints test BLEU (greedy), ROUGE-L and perplexity of each forward model and writes them
to WORKDIR/table.md; finished runs and translations are read, not redone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_transformer  # noqa: E402
from pretrained_encoders import seconds, test_scores  # noqa: E402
from sweeps import publish_table, trained_summary  # noqa: E402

from seqjax.config import Config  # noqa: E402
from seqjax.data.sources import split_path  # noqa: E402
from seqjax.training.features.back_translation import back_translate, combine_pairs, read_pairs, write_corpus  # noqa: E402
from seqjax.training.features.generation import DecodeOptions  # noqa: E402

TAG = "<bt>"


def model_config(steps: int, train: str, src: str = "en", tgt: str = "de") -> Config:
    """The smaller gettext Transformer on the pairs of prefix `train`, `src` → `tgt`."""
    base = gettext_transformer.get_config()
    return dataclasses.replace(
        base,
        data=dataclasses.replace(base.data, train=train, src=src, tgt=tgt),
        model=dataclasses.replace(base.model, d_model=128, layers=2, num_heads=4, d_ff=512),
        train=dataclasses.replace(base.train, steps=steps, eval_every=0, checkpoint_every=steps, num_printed_samples=0),
    )


def split_corpus(corpus: str, mono_lines: int) -> tuple[str, str]:
    """Writes the parallel half (prefix returned first) and the monolingual German lines (file)."""
    parallel, mono = os.path.join(corpus, "parallel"), os.path.join(corpus, "mono.de")
    if not os.path.isfile(mono):
        sources, targets = read_pairs(split_path(gettext_transformer.get_config().data, "train"), "en", "de")
        half = len(sources) // 2
        write_corpus(parallel, "en", "de", (sources[:half], targets[:half]))
        with open(mono, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in targets[half : half + mono_lines]))
    return parallel, mono


def synthetic_corpus(backward: str, parallel: str, mono: str, prefix: str, options: DecodeOptions) -> str:
    """Back-translates `mono` with the run in `backward` and writes real + tagged synthetic pairs."""
    from seqjax.training.saved.run import Run

    if not os.path.isfile(prefix + ".de"):
        with open(mono, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
        restored = Run.open(backward).restore()
        exp, state = restored.exp, restored.state
        start = time.perf_counter()
        synthetic = back_translate(exp, state.params, lines, options)
        took = time.perf_counter() - start
        pairs = combine_pairs(read_pairs(parallel, "en", "de"), (synthetic, lines), upsample=1, tag=TAG)
        write_corpus(prefix, "en", "de", pairs)
        with open(prefix + ".json", "w") as f:
            json.dump({"decoding": options.describe(), "lines": len(lines), "seconds": took}, f)
        print(f"== back-translated {len(lines):,} lines ({options.describe()}) in {took:.0f} s", flush=True)
    return prefix


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join("runs", "back_translation"))
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--mono-lines", type=int, default=8000)
    parser.add_argument("--beam", type=int, default=2)
    args = parser.parse_args(argv)
    if args.steps < 10 or args.mono_lines < 1 or args.beam < 2:
        raise ValueError(
            f"need --steps >= 10, --mono-lines >= 1, --beam >= 2; got {args.steps}, {args.mono_lines}, {args.beam}"
        )
    corpus = os.path.join(args.workdir, "corpus")
    os.makedirs(corpus, exist_ok=True)
    parallel, mono = split_corpus(corpus, args.mono_lines)
    backward = os.path.join(args.workdir, "backward")
    trained_summary(model_config(args.steps, parallel, "de", "en"), backward, "backward de->en on the parallel half")
    corpora = {
        "parallel half": parallel,
        f"+ back-translation, beam {args.beam}": synthetic_corpus(
            backward, parallel, mono, os.path.join(corpus, "bt_beam"), DecodeOptions(beam=args.beam)
        ),
        "+ back-translation, sampled": synthetic_corpus(
            backward, parallel, mono, os.path.join(corpus, "bt_sampled"), DecodeOptions(sample=True)
        ),
        "all real pairs (upper bound)": "mt/gettext-en-de/train",
    }
    rows = {}
    # The synthetic corpora's runs first: they need the back-translations, the others do not.
    for name, train in sorted(corpora.items(), key=lambda item: "back-translation" not in item[0]):
        run_dir = os.path.join(args.workdir, "forward-" + "".join(c if c.isalnum() else "_" for c in name).strip("_"))
        cfg = model_config(args.steps, train)
        trained_summary(cfg, run_dir, f"forward en->de: {name}")
        pairs = len(read_pairs(split_path(cfg.data, "train"), "en", "de")[0])
        rows[name] = (name, test_scores(run_dir), seconds(run_dir), pairs)
    rows = [rows[name] for name in corpora]
    backward_scores = test_scores(backward)
    lines = [
        f"Backward de→en model: test BLEU {backward_scores['bleu']:.2f} (copy {backward_scores['copy_bleu']:.2f}).",
        "",
        "| forward en→de model | train pairs | test BLEU, greedy | test ROUGE-L | test perplexity | train wall time |",
        "|---|---|---|---|---|---|",
        f"| copy the source | - | {rows[0][1]['copy_bleu']:.2f} | {rows[0][1]['copy_rougeL']:.3f} | - | - |",
        *(
            f"| {n} | {p:,} | {s['bleu']:.2f} | {s['rougeL']:.3f} | {s['perplexity']:.1f} | {t / 60:.1f} min |"
            for n, s, t, p in rows
        ),
    ]
    publish_table("\n".join(lines) + "\n", args.workdir)


if __name__ == "__main__":
    main()
