"""Generating with a saved run, as `seqjax generate` does: a prompt continued by a language model
(trained or counted) or translated by an encoder-decoder, or every line of an input, one output
line each, under a progress bar on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from seqjax.models import generates, is_seq2seq
from seqjax.training.features.continuation import continuations, continue_lines
from seqjax.training.features.generation import DecodeOptions, Progress, translate_lines

if TYPE_CHECKING:
    from seqjax.training.saved.run import Run

T = TypeVar("T")


def with_progress(total: int, run: Callable[[Progress], T]) -> T:
    """run(progress) under a progress bar of `total` lines on stderr, shown from the first
    progress on: a refusal of the input before any (a prompt too long) is its one line alone."""
    from tqdm import tqdm

    bars: list[tqdm] = []

    def progress(lines: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc="generate", unit="line", file=sys.stderr, dynamic_ncols=True))
        bars[0].update(lines)

    try:
        return run(progress)
    finally:
        for bar in bars:
            bar.close()


def check_generates(run: Run, *, prompted: bool) -> None:
    """Raises ValueError when the run has no decode step (an encoder), or is an encoder-decoder
    and not `prompted` (given no source to translate)."""
    if not generates(run.cfg.model):
        raise ValueError(
            f"--workdir {run.workdir} holds an encoder (model.kind={run.cfg.model.kind}), "
            "which has no decode step: nothing to generate"
        )
    if is_seq2seq(run.cfg.model) and not prompted:
        raise ValueError(
            f"--workdir {run.workdir} is a sequence-to-sequence run: give the source to translate with "
            "--prompt TEXT, or a file of sources, one a line, with --input FILE (- for standard input)"
        )


def prompt_outputs(
    run: Run, prompt: str | None, options: DecodeOptions, *, num: int, max_len: int, seed: int = 0
) -> list[str]:
    """The lines shown for `prompt`: an encoder-decoder's `PROMPT -> TRANSLATION`; a language
    model's `num` continuations of it (None: from the start of a line, a VAE LM from z drawn
    from its prior), each `  sample: TEXT`, of `max_len` tokens at most after the prompt."""
    if is_seq2seq(run.cfg.model):
        restored = run.restore([])
        translation = translate_lines(restored.exp, restored.state.params, [prompt or ""], options, seed=seed)[0]
        return [f"{prompt} -> {translation}"]
    decoder = run.lm_decoder(options)
    drawn = continuations(decoder, prompt or "", num=num, max_len=max_len, seed=seed)
    return [f"  sample: {text}" for text in drawn.texts]


def line_outputs(run: Run, lines: list[str], options: DecodeOptions, *, max_len: int, seed: int = 0) -> list[str]:
    """Each line translated (encoder-decoder) or continued (language model, `max_len` tokens at
    most), one output line each, line i drawn with a key from `seed` and i."""
    if is_seq2seq(run.cfg.model):
        restored = run.restore([])
        exp, params = restored.exp, restored.state.params
        return with_progress(
            len(lines), lambda progress: translate_lines(exp, params, lines, options, progress, seed=seed)
        )
    decoder = run.lm_decoder(options)
    return with_progress(
        len(lines), lambda progress: continue_lines(decoder, lines, max_len=max_len, seed=seed, progress=progress)
    )
