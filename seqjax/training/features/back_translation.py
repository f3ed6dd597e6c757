"""Back-translation (Sennrich et al. 2016; Edunov et al. 2018): a trained target→source model
translates monolingual target-side text, and the synthetic pairs join the real ones.

`back_translate` decodes the monolingual lines with the backward run (beam search or sampling,
`DecodeOptions`); `combine_pairs` lays out the training corpus: the real pairs `upsample`
times, then one synthetic pair per monolingual line, each synthetic source prefixed by `tag`
(Caswell et al. 2019's tagged back-translation) when one is given; `write_corpus` writes it as
PREFIX.SRC / PREFIX.TGT, the files of `data.kind=parallel`, for the forward run to train on.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from seqjax.contracts import Params
from seqjax.training.features.generation import DecodeOptions, Progress, translate_lines

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment


def back_translate(
    exp: Experiment,
    params: Params,
    lines: list[str],
    options: DecodeOptions,
    progress: Progress | None = None,
    *,
    seed: int = 0,
) -> list[str]:
    """The backward run's translation of each monolingual line (a blank line stays blank): the
    synthetic sources of the forward direction, line-aligned with `lines`; sampled, line i draws
    with its own key from `seed` and i (`generation.row_keys`)."""
    if not exp.is_seq2seq:
        raise ValueError(
            f"back-translation needs an encoder-decoder run (target -> source), got model.kind={exp.cfg.model.kind!r}"
        )
    return translate_lines(exp, params, lines, options, progress, seed=seed)


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
