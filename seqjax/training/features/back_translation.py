"""Back-translation (Sennrich et al. 2016; Edunov et al. 2018): a trained target→source model
translates monolingual target-side text, and the synthetic pairs join the real ones.

The backward run decodes the monolingual lines (`generation.translate_lines`: beam search or
sampling, `DecodeOptions`); `combine_pairs` lays out the training corpus: the real pairs `upsample`
times, then one synthetic pair per monolingual line, each synthetic source prefixed by `tag`
(Caswell et al. 2019's tagged back-translation) when one is given; `write_corpus` writes it as
PREFIX.SRC / PREFIX.TGT, the files of `data.kind=parallel`, for the forward run to train on;
`back_translated_corpus` does all of it with a saved backward run, as `seqjax backtranslate` does,
and `forward_corpus` gives the forward run's data settings that train on what it wrote.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from seqjax.data.corpora.formats import parallel_files
from seqjax.data.corpora.readers import read_input, read_parallel
from seqjax.data.corpora.sources import SPLITS, data_path, side_names, split_files
from seqjax.models import is_seq2seq
from seqjax.output_paths import check_output_file
from seqjax.training.features.generation import DecodeOptions, translate_lines
from seqjax.training.features.run_generation import with_progress

if TYPE_CHECKING:
    from seqjax.training.saved.run import Run

# The forward run's data settings that `forward_corpus` gives: the corpus written, not the user's.
CORPUS_KEYS = ("data.kind", "data.format", "data.train", "data.src", "data.tgt")


def combine_pairs(
    real: tuple[list[str], list[str]],
    synthetic: tuple[list[str], list[str]],
    *,
    upsample: int,
    tag: str = "",
) -> tuple[list[str], list[str]]:
    """The forward run's (sources, targets): the real pairs `upsample` times, then the
    synthetic pairs, each synthetic source as `tag + " " + source` when a tag is given.

    real, synthetic: (sources, targets) of equal lengths, one line each (no line breaks).
    A synthetic pair with a blank side is left out (it teaches nothing).
    """
    if isinstance(upsample, bool) or not isinstance(upsample, int) or upsample < 0:
        raise ValueError(f"upsample must be an int >= 0 (copies of the real pairs), got {upsample!r}")
    if any("\n" in part for part in (tag, *real[0], *real[1], *synthetic[0], *synthetic[1])):
        raise ValueError("pairs and the tag must be single lines (no line breaks)")
    for name, (sources, targets) in (("real", real), ("synthetic", synthetic)):
        if len(sources) != len(targets):
            raise ValueError(f"{name} sources and targets must be line-aligned, got {len(sources)} and {len(targets)}")
    kept = [(s, t) for s, t in zip(*synthetic) if s.strip() and t.strip()]
    sources = list(real[0]) * upsample + [f"{tag} {s}" if tag else s for s, _ in kept]
    targets = list(real[1]) * upsample + [t for _, t in kept]
    return sources, targets


def refuse_overwrites(written: list[str], read: list[str]) -> None:
    """Raises ValueError when a file to be written is one that is read (the same path after
    links are resolved, or the same file under another name): it would be lost."""
    for out in written:
        for source in read:
            same = os.path.realpath(out) == os.path.realpath(source)
            if same or (os.path.exists(out) and os.path.exists(source) and os.path.samefile(out, source)):
                raise ValueError(
                    f"--output must name new files, got {out!r}, which is {source!r}: an input (--monolingual, "
                    "--real or the backward run's corpus) that writing it would lose"
                )


def write_corpus(prefix: str, src: str, tgt: str, pairs: tuple[list[str], list[str]]) -> tuple[str, str]:
    """Writes PREFIX.SRC and PREFIX.TGT, one pair per line; returns their paths."""
    directory = os.path.dirname(prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    paths = (f"{prefix}.{src}", f"{prefix}.{tgt}")
    for path, lines in zip(paths, pairs):
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
    return paths


def refuse_corpus_overrides(overrides: list[str]) -> None:
    """Raises ValueError when an override of the forward run sets a key of `CORPUS_KEYS`."""
    owned = [a for a in overrides if a.partition("=")[0].strip() in CORPUS_KEYS]
    if owned:
        raise ValueError(f"--set {owned[0]}: backtranslate sets the forward run's {', '.join(CORPUS_KEYS)}")


def forward_corpus(prefix: str, src: str, tgt: str) -> list[str]:
    """The forward run's `CORPUS_KEYS` overrides: train on PREFIX.SRC / PREFIX.TGT as `write_corpus` wrote them."""
    return [
        "data.kind=parallel",
        "data.format=lines",  # what write_corpus wrote
        f"data.train={os.path.abspath(prefix)}",
        f"data.src={src}",
        f"data.tgt={tgt}",
    ]


def back_translated_corpus(
    run: Run,
    monolingual: str,
    output: str,
    options: DecodeOptions,
    *,
    real: str | None = None,
    upsample: int = 1,
    tag: str = "",
    seed: int = 0,
) -> tuple[str, list[str]]:
    """The backward `run` translates the file `monolingual` (read as its corpus is) into synthetic
    pairs, which `write_corpus` writes at `output` after the real pairs of `real` (a prefix, as the
    run's data.* paths are) `upsample` times. Returns the line saying what was written and the
    forward run's `forward_corpus` overrides.

    Raises:
      ValueError: the run is no encoder-decoder, an output is an input (`refuse_overwrites`) or
        cannot be written, an input is unreadable, or `monolingual` holds only blank lines.
    """
    backward = run.cfg
    if not is_seq2seq(backward.model):
        raise ValueError(
            f"--workdir {run.workdir} must hold an encoder-decoder run, got model.kind={backward.model.kind}"
        )
    src, tgt = backward.data.tgt, backward.data.src  # the forward direction reads what the backward one wrote
    real_prefix = data_path(backward.data, real) if real else None  # as the run's own corpus
    corpus_format = backward.data.format  # --real and --monolingual are read as the run's own corpus
    real_files = parallel_files(real_prefix, src, tgt, corpus_format).values() if real_prefix else []
    # the backward run's corpus is not to be lost either
    run_files = [side for s in SPLITS for side in split_files(backward.data, s).values()]
    read = [monolingual, *dict.fromkeys(side.path for side in (*real_files, *run_files))]
    for path in (f"{output}.{src}", f"{output}.{tgt}"):
        check_output_file(path, "--output")
    refuse_overwrites([f"{output}.{src}", f"{output}.{tgt}"], read)
    real_sides = side_names(backward.data)[::-1]  # for pairs in records, the fields, else the suffixes src, tgt
    real_pairs = (
        read_parallel(real_prefix, *real_sides, format=corpus_format, name="--real") if real_prefix else ([], [])
    )
    lines = read_input(monolingual, "--monolingual", backward.data)
    if not any(line.strip() for line in lines):
        raise ValueError(
            f"--monolingual must hold some non-blank line to back-translate, got {len(lines)} blank line(s) "
            f"in {monolingual!r}"
        )
    restored = run.restore([])
    synthetic = with_progress(
        len(lines),
        lambda progress: translate_lines(restored.exp, restored.state.params, lines, options, progress, seed=seed),
    )
    pairs = combine_pairs(real_pairs, (synthetic, lines), upsample=upsample, tag=tag)
    paths = write_corpus(output, src, tgt, pairs)
    written = (
        f"wrote {len(pairs[0]):,} pairs to {' and '.join(paths)}: {len(real_pairs[0]):,} real x {upsample}, "
        f"{len(pairs[0]) - len(real_pairs[0]) * upsample:,} synthetic ({options.describe()})"
    )
    return written, forward_corpus(output, src, tgt)
