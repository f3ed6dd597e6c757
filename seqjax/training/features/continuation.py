"""A language model's prompts continued into text: `seqjax generate --prompt` and `--input`, and
the samples a run prints.

A prompt is read as the run's tokenizer frames a line (`Framing.prompt`): after the `</s>` that
ends the line before for seqjax's own tokenizers, exactly as `transformers` encodes it for a
pretrained one (Llama's `<s>` first, nothing before a GPT-2 prompt). Prompt and continuation
come back as one text (`Tokenizer.continue_text`).

Continuation i of a prompt, and line i of a file, draw with `row_keys(seed, [i])`: what a line
becomes does not depend on the lines decoded beside it. `continue_lines` pads the prompts of a
file to a few widths (`padded_width`: powers of two from `MIN_WIDTH`) and each row reads its
own prompt's length, so a file compiles one program per width it uses, not one per prompt
length. `check_room` refuses on the host a prompt or a --max-len that a model with positions up
to model.max_len (a Transformer) cannot hold, naming which.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.contracts import Params
from seqjax.data import Tokenizer
from seqjax.models import readable_length
from seqjax.training.features.generation import DecodeOptions, Progress, decode_prompts, one_line, row_keys

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment

# decode(prompts [B, P] int32, lengths [B] int32, keys [B], max_len) -> (tokens [B, max_len] int32,
# lengths [B] int32), numpy in and out: row b continues its first lengths[b] prompt tokens, drawing with keys[b].
DecodeFn = Callable[[np.ndarray, np.ndarray, jax.Array, int], tuple[np.ndarray, np.ndarray]]
MIN_WIDTH = 8
SAMPLING = DecodeOptions(sample=True)  # what a run's printed samples decode with


@dataclasses.dataclass(frozen=True)
class LMDecoder:
    """What continuing a run's prompts needs: its tokenizer, its `DecodeFn`, the rows decoded at
    once, and `positions`, model.max_len for a model with positions up to it (else None): a prompt
    and what is decoded after it must fit in them."""

    tokenizer: Tokenizer
    decode: DecodeFn
    batch_size: int
    positions: int | None


def model_decoder(exp: Experiment, params: Params, options: DecodeOptions) -> LMDecoder:
    """The `LMDecoder` of a trained language model."""

    def decode_fn(
        prompts: np.ndarray, lengths: np.ndarray, keys: jax.Array, max_len: int
    ) -> tuple[np.ndarray, np.ndarray]:
        tokens = decode_prompts(
            exp.model,
            exp.head,
            params,
            keys,
            jnp.asarray(prompts),
            jnp.asarray(lengths),
            max_len=max_len,
            options=options,
        )
        result: tuple[np.ndarray, np.ndarray] = jax.device_get(tokens)
        return result

    return LMDecoder(exp.tokenizer, decode_fn, exp.cfg.train.batch_size, readable_length(exp.cfg.model))


def check_room(positions: int | None, length: int, max_len: int, what: str, max_len_name: str = "--max-len") -> None:
    """Raises ValueError when a prompt of `length` tokens (`what` names it) and `max_len` tokens
    after it do not fit in `positions` (None: any do): naming the prompt when it alone leaves no
    room, else `max_len_name` and its largest value for this prompt."""
    if positions is None:
        return
    if length >= positions:
        raise ValueError(
            f"{what} is {length:,} tokens, more than model.max_len={positions} leaves room for: at most "
            f"{positions - 1} before the first generated token"
        )
    if length + max_len > positions:
        raise ValueError(
            f"{max_len_name} must be <= {positions - length} after {what} of {length:,} tokens "
            f"(model.max_len={positions} holds both), got {max_len}"
        )


def padded_width(length: int, widest: int | None) -> int:
    """The width a prompt of `length` tokens is padded to among others: the power of two at
    least `length` and `MIN_WIDTH`, but at most `widest` (None: no bound; `widest` >= length)."""
    width = max(MIN_WIDTH, 1 << (length - 1).bit_length())
    return width if widest is None else min(width, widest)


@dataclasses.dataclass(frozen=True)
class Continuations:
    """What `continuations` decoded: `prompt_ids`, the ids the model read for the prompt
    (`Framing.prompt`); `ids`, each continuation's (its `</s>` included when it ends); `texts`,
    each continuation one text with the prompt (`Tokenizer.continue_text`)."""

    prompt_ids: list[int]
    ids: list[list[int]]
    texts: list[str]


def continuations(
    decoder: LMDecoder,
    prompt: str,
    *,
    num: int,
    max_len: int,
    seed: int = 0,
    max_len_name: str = "--max-len",
) -> Continuations:
    """`num` continuations of `prompt`, each up to `max_len` tokens, continuation i drawn with
    `row_keys(seed, [i])`."""
    tokenizer = decoder.tokenizer
    ids = tokenizer.framing.prompt(tokenizer.encode(prompt))
    check_room(decoder.positions, len(ids), max_len, "the prompt", max_len_name)
    prompts = np.tile(np.asarray(ids, np.int32), (num, 1))
    tokens, lengths = decoder.decode(prompts, np.full(num, len(ids), np.int32), row_keys(seed, range(num)), max_len)
    rows = [row[:n].tolist() for row, n in zip(tokens, lengths)]
    return Continuations(ids, rows, [tokenizer.continue_text(prompt, row) for row in rows])


def continue_lines(
    decoder: LMDecoder,
    lines: list[str],
    *,
    max_len: int,
    seed: int = 0,
    progress: Progress | None = None,
) -> list[str]:
    """Each non-blank line continued (one line of text with it), line i drawn with
    `row_keys(seed, [i])`; blank lines stay blank.

    Prompts padded to the same `padded_width` are decoded together, `decoder.batch_size` rows
    at a time (a short batch repeats its first row), so each width compiles once.
    """
    tokenizer = decoder.tokenizer
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    encoded = tokenizer.encode_batch([lines[i] for i in nonblank])
    prompts = {i: tokenizer.framing.prompt(ids) for i, ids in zip(nonblank, encoded)}
    if prompts:
        longest = max(prompts, key=lambda i: len(prompts[i]))
        for i, ids in prompts.items():
            check_room(decoder.positions, len(ids), 1, f"line {i + 1} of --input")
        check_room(decoder.positions, len(prompts[longest]), max_len, f"line {longest + 1} of --input, the longest,")
    widest = None if decoder.positions is None else decoder.positions - max_len
    by_width = collections.defaultdict(list)
    for i, ids in prompts.items():
        by_width[padded_width(len(ids), widest)].append(i)
    if progress is not None:
        progress(len(lines) - len(prompts))
    outputs = [""] * len(lines)
    size = decoder.batch_size
    for width, members in sorted(by_width.items()):
        for start in range(0, len(members), size):
            rows = members[start : start + size]
            rows_padded = rows + [rows[0]] * (size - len(rows))
            batch = np.zeros((size, width), np.int32)
            for r, i in enumerate(rows_padded):
                batch[r, : len(prompts[i])] = prompts[i]
            lengths = np.array([len(prompts[i]) for i in rows_padded], np.int32)
            tokens, ends = decoder.decode(batch, lengths, row_keys(seed, rows_padded), max_len)
            for i, row, n in zip(rows, tokens, ends):
                outputs[i] = one_line(tokenizer.continue_text(lines[i], row[:n].tolist()))
            if progress is not None:
                progress(len(rows))
    return outputs


def sample_texts(exp: Experiment, params: Params, *, num: int) -> list[str]:
    """`num` continuations of an empty prompt by a language model (up to train.printed_sample_len
    tokens; SAMPLING, continuation i drawn with `row_keys(0, [i])`), as texts: a run's samples."""
    decoder = model_decoder(exp, params, SAMPLING)
    max_len, name = exp.cfg.train.printed_sample_len, "train.printed_sample_len"
    return continuations(decoder, "", num=num, max_len=max_len, max_len_name=name).texts


def lm_samples(
    exp: Experiment, params: Params, *, echo: Callable[[str], None] = print, sampled: list[str] | None = None
) -> dict:
    """Prints and returns a run's train.num_printed_samples samples: continuations of an empty
    prompt by SAMPLING, continuation i drawn with `row_keys(0, [i])`; the first of `sampled` where
    it holds enough, texts drawn so (`task_reports.TaskMeasure.samples`), else decoded here."""
    num = exp.cfg.train.num_printed_samples
    texts = sampled[:num] if sampled is not None and len(sampled) >= num else sample_texts(exp, params, num=num)
    for text in texts:
        echo(f"  sample: {text}")
    return {"decoding": SAMPLING.describe(), "samples": texts}
