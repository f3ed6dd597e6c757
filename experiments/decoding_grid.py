"""Test BLEU and ROUGE-L of a trained encoder–decoder for greedy and beam search × length penalty.

    python experiments/decoding_grid.py RUN_DIR [--split test] [--beams 2,3,4,8] [--penalties 0,0.6,1.0]
        [--name decoding_grid]       # --beams '' decodes greedily only

Restores the latest checkpoint of RUN_DIR (a `seqjax train` run of a seq2seq model), decodes
the split with each setting (`seqjax eval --beam N --length-penalty A` gives any single
cell), and prints a markdown table with the copy-the-source baseline and the decoding wall
time per setting; the table, the figures and the run's record also go to
experiments/results/NAME.json and .md (`--name`, default decoding_grid; `--results-dir`).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summaries  # noqa: E402

from seqjax.training.features.generation import DecodeOptions, translate  # noqa: E402
from seqjax.training.saved.run import Run  # noqa: E402


def grid(beams: str, penalties: str) -> list[DecodeOptions]:
    """Greedy, then each beam width of the comma list `beams` (none when empty) × each length
    penalty of `penalties`."""
    widths = [int(b) for b in beams.split(",") if b.strip()]
    alphas = [float(a) for a in penalties.split(",") if a.strip()]
    if any(b < 2 for b in widths) or any(a < 0 for a in alphas) or (widths and not alphas):
        raise ValueError(f"--beams must be widths >= 2 and --penalties numbers >= 0, got {beams!r} and {penalties!r}")
    return [DecodeOptions()] + [DecodeOptions(beam=b, length_penalty=a) for b in widths for a in alphas]


def table(rows: list[tuple[DecodeOptions, dict, float]]) -> str:
    """Markdown: copy-the-source, then one row per (options, report, decode seconds)."""
    copy = rows[0][1]
    lines = [
        "| decoding | length penalty | BLEU | ROUGE-L | exact match | decode s |",
        "|---|---|---|---|---|---|",
        f"| copy the source | - | {copy['copy_bleu']:.2f} | {copy['copy_rougeL']:.3f} | - | - |",
    ]
    for options, report, seconds in rows:
        name = "greedy" if options.beam == 1 else f"beam {options.beam}"
        penalty = "-" if options.beam == 1 else f"{options.length_penalty:g}"
        lines.append(
            f"| {name} | {penalty} | {report['bleu']:.2f} | {report['rougeL']:.3f} | "
            f"{report['exact_match']:.1%} | {seconds:.0f} |"
        )
    return "\n".join(lines) + "\n"


def figures(rows: list[tuple[DecodeOptions, dict, float]]) -> list[dict]:
    """The table's numbers: each setting's decoding, BLEU, ROUGE-L, exact match, copy-the-source and seconds."""
    keys = ("bleu", "rougeL", "exact_match", "copy_bleu", "copy_rougeL")
    return [
        {"beam": o.beam, "length_penalty": o.length_penalty, **{k: r[k] for k in keys}, "seconds": s}
        for o, r, s in rows
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--split", default="test")
    parser.add_argument("--beams", default="2,3,4,8")
    parser.add_argument("--penalties", default="0,0.6,1.0")
    parser.add_argument("--name", default="decoding_grid", help="the summary's name under --results-dir")
    parser.add_argument("--results-dir", default=summaries.RESULTS_DIR)
    args = parser.parse_args(argv)
    restored = Run.open(args.workdir, ["train.num_printed_samples=0"]).restore()
    exp, state = restored.exp, restored.state
    if not exp.is_seq2seq:
        raise ValueError(f"{args.workdir} holds a language model; the grid needs an encoder–decoder")
    settings = grid(args.beams, args.penalties)
    references = exp.pairs.references[args.split]
    ref_words = sum(len(r.split()) for r in references)
    rows = []
    for options in settings:
        start = time.perf_counter()
        report = translate(exp, state.params, args.split, options=options, echo=lambda _: None)
        seconds = time.perf_counter() - start
        rows.append((options, report, seconds))
        print(
            f"{options.describe():<32} BLEU {report['bleu']:6.2f}  ROUGE-L {report['rougeL']:.3f}  "
            f"exact {report['exact_match']:.1%}  {seconds:6.1f} s",
            flush=True,
        )
    copy = rows[0][1]
    print(
        f"\n{len(references)} {args.split} pairs, {ref_words} reference words; copy-the-source BLEU "
        f"{copy['copy_bleu']:.2f}, ROUGE-L {copy['copy_rougeL']:.3f}\n"
    )
    text = table(rows)
    print(text)
    record = summaries.run_record(args.workdir)
    for path in summaries.write_summary(args.name, text, [record], figures(rows), args.results_dir):
        print("wrote", summaries.portable(path))


if __name__ == "__main__":
    main()
