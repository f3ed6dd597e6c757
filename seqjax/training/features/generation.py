"""Generation glue: chooses a decoder (greedy, sampling, beam search), feeds prompts, and
translates sources. Models and heads meet the decoders in `seqjax.model_head.make_step_fn`; the
counted n-gram brings its own step function (`counted.counted_decoder`). A language
model's prompts, continued into text, are `continuation`'s.

Every row of a batch may have its own prompt, of its own length: `decode_prompts` reads each
row's prompt but its last token into the state (`model_head.prefill`, per row) and
`run_decoder` feeds that last token as the row's first input (the decoders themselves feed
every row one static `bos_id`). Every row draws with a key of its own (`row_keys`: from a seed
and the row's index, so what a line decodes to does not depend on the batch it is in).
`translate_lines` buckets sources as evaluation does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from seqjax import decoding
from seqjax.contracts import SPECIAL_IDS, Head, Model, Params, StepFn
from seqjax.data import seq2seq_eval_batches
from seqjax.metrics import corpus_bleu, rouge
from seqjax.model_head import init_decode_state, make_step_fn, prefill
from seqjax.models import readable_length

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment

Progress = Callable[[int], object]  # called with the number of lines just done


def row_keys(seed: int, indices: Iterable[int]) -> jax.Array:
    """[N] `jax.random` keys, `fold_in(key(seed), i)` for each index i: the key of the line (or
    continuation) numbered i, the same in whatever batch, order or company it is decoded."""
    index = jnp.asarray(np.fromiter(indices, np.uint32))
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(seed), index)


@dataclasses.dataclass(frozen=True)
class DecodeOptions:
    """How to decode: beam > 1 is beam search; otherwise sampling if `sample`, else greedy."""

    beam: int = 1
    length_penalty: float = 0.0
    sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise ValueError(f"beam must be >= 1, got {self.beam}")
        if self.beam > 1 and self.sample:
            raise ValueError("choose beam search (beam > 1) or sampling, not both")

    def describe(self) -> str:
        if self.beam > 1:
            return f"beam {self.beam}, length penalty {self.length_penalty}"
        if self.sample:
            return f"sampling (temperature {self.temperature}, top-k {self.top_k}, top-p {self.top_p})"
        return "greedy"


def _best_beam(sequences: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The best hypothesis of beam search [B, K, T] as tokens [B, T] and lengths [B] (incl. EOS)."""
    best = sequences[:, 0]
    is_eos = best == SPECIAL_IDS.eos
    lengths = jnp.where(is_eos.any(axis=1), jnp.argmax(is_eos, axis=1) + 1, best.shape[1])
    return best, lengths.astype(jnp.int32)


def run_decoder(
    step_fn: StepFn, state: Any, keys: jax.Array, last: jax.Array, *, max_len: int, options: DecodeOptions
) -> tuple[jax.Array, jax.Array]:
    """Decodes after prompts whose tokens but the last are already in `state`.

    Args:
      step_fn, state: a `seqjax.contracts.StepFn` and its state for B rows.
      keys: [B] `jax.random` keys, each row's own (sampling draws with them).
      last: [B] int32, each row's last prompt token, its first step's input.

    Returns:
      tokens [B, max_len] int32 (pad after EOS) and lengths [B] int32 (EOS included).
    """

    def last_first(carry: tuple[Any, jax.Array], tokens: jax.Array) -> tuple[jax.Array, tuple[Any, jax.Array]]:
        inner, pending = carry  # pending [B]: the prompt's last token until it is fed, then -1
        log_probs, inner = step_fn(inner, jnp.where(pending >= 0, pending, tokens))
        return log_probs, (inner, jnp.full_like(pending, -1))

    carry = (state, jnp.asarray(last, jnp.int32))
    # bos_id is never fed: `last_first` feeds `last` in its place.
    common = dict(bos_id=SPECIAL_IDS.bos, eos_id=SPECIAL_IDS.eos, pad_id=SPECIAL_IDS.pad, max_len=max_len)
    if options.beam > 1:
        sequences, _ = decoding.beam_search(
            last_first, carry, beam_size=options.beam, length_penalty=options.length_penalty, **common
        )
        return _best_beam(sequences)
    if options.sample:
        return decoding.sample(
            last_first, carry, keys, temperature=options.temperature, top_k=options.top_k, top_p=options.top_p, **common
        )
    return decoding.greedy(last_first, carry, **common)


@partial(jax.jit, static_argnames=("model", "head", "max_len", "options"))
def decode_prompts(
    model: Model,
    head: Head,
    params: Params,
    keys: jax.Array,
    prompts: jax.Array,
    lengths: jax.Array,
    batch: Mapping[str, Any] | None = None,
    *,
    max_len: int,
    options: DecodeOptions,
) -> tuple[jax.Array, jax.Array]:
    """Decodes after each row's prompt, for an encoder batch (`batch`'s source) or an LM.

    Args:
      keys: [B] `jax.random` keys, each row's own: its samples, and its latent z when one is drawn.
      prompts: [B, P] int32; row b's prompt is its first lengths[b] tokens (the rest is not
        read), whose last is the row's first input.
      lengths: [B] int32 in [1, P].
      batch: an encoder's source, or a latent-variable model's "latent" z [B, Z]; without one
        such a model decodes from z drawn from the prior N(0, I) with a key split off each row's.

    Returns:
      tokens [B, max_len] int32 (after the prompt, pad after EOS) and lengths [B] int32.
    """
    num, width = prompts.shape
    latent_size = getattr(model, "latent_size", None) if getattr(model, "latent", False) else None
    if latent_size is not None and (batch is None or "latent" not in batch):
        split = jax.vmap(jax.random.split)(keys)
        keys = split[:, 0]
        batch = {"latent": jax.vmap(lambda key: jax.random.normal(key, (latent_size,), jnp.float32))(split[:, 1])}
    state = init_decode_state(model, params, num, width + max_len, batch)
    state = prefill(model, params, state, prompts[:, :-1], lengths - 1)
    last = jnp.take_along_axis(prompts, (lengths - 1)[:, None], axis=1)[:, 0]
    return run_decoder(make_step_fn(model, head, params), state, keys, last, max_len=max_len, options=options)


def decode(
    model: Model,
    head: Head,
    params: Params,
    keys: jax.Array,
    batch: Mapping[str, Any] | None = None,
    *,
    prompt: Sequence[int],
    num: int,
    max_len: int,
    options: DecodeOptions,
) -> tuple[jax.Array, jax.Array]:
    """Decodes `num` rows after one `prompt` (ids; its last one is fed first), row i with keys[i]
    ([num] keys), for an encoder batch or an LM.

    Returns tokens [num, max_len] int32 (after the prompt, 0 after EOS) and lengths [num] int32.
    """
    prompts = jnp.broadcast_to(jnp.asarray(prompt, jnp.int32), (num, len(prompt)))
    lengths = jnp.full((num,), len(prompt), jnp.int32)
    result: tuple[jax.Array, jax.Array] = decode_prompts(
        model, head, params, keys, prompts, lengths, batch, max_len=max_len, options=options
    )
    return result


def decode_new_lines(
    exp: Experiment,
    params: Params,
    batch: Mapping[str, Any] | None = None,
    *,
    num: int,
    max_len: int,
    options: DecodeOptions,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """`num` lines of a language model, each decoded from where a line starts (the tokenizer's
    `framing` of an empty prompt: `</s>`, Llama's `<s>`), row i with `row_keys(seed, [i])`
    (`batch` as `decode`'s, e.g. a VAE's latents), on the host: tokens [num, max_len] int32 and
    lengths [num] int32."""
    tokens = decode(
        exp.model,
        exp.head,
        params,
        row_keys(seed, range(num)),
        batch,
        prompt=exp.tokenizer.framing.prompt([]),
        num=num,
        max_len=max_len,
        options=options,
    )
    result: tuple[np.ndarray, np.ndarray] = jax.device_get(tokens)
    return result


def one_line(text: str) -> str:
    """`text` with any line break a tokenizer could emit (byte-level BPE has them) made a space."""
    return " ".join(text.splitlines())


def translate_texts(
    exp: Experiment,
    params: Params,
    sources: Sequence[np.ndarray],
    options: DecodeOptions,
    progress: Progress | None = None,
    *,
    seed: int = 0,
    numbers: Sequence[int] | None = None,
) -> list[str]:
    """Decodes source id arrays with a seq2seq model, bucketed by length as evaluation is;
    returns one detokenized hypothesis each. Source i decodes with `row_keys(seed, [numbers[i]])`
    (numbers: default 0, 1, ...), whatever its bucket and batch."""
    hypotheses = [""] * len(sources)
    number = np.arange(len(sources)) if numbers is None else np.asarray(numbers)
    limit = readable_length(exp.cfg.model)
    dummy_targets = [np.zeros(0, np.int32)] * len(sources)
    batches = seq2seq_eval_batches(sources, dummy_targets, exp.cfg.train.batch_size, exp.cfg.data.buckets, limit)
    for batch, indices in batches:
        src = {"src": batch["src"], "src_mask": batch["src_mask"]}
        # Static per bucket (bounded compiles); the BOS prompt and the output fit model.max_len.
        max_len = max(exp.cfg.data.max_pair_len, batch["src"].shape[1]) + 1
        max_len = max_len if limit is None else min(max_len, limit - 1)
        tokens, lengths = jax.device_get(
            decode(
                exp.model,
                exp.head,
                params,
                row_keys(seed, np.where(indices >= 0, number[np.maximum(indices, 0)], 0)),  # padding rows: any key
                src,
                prompt=(SPECIAL_IDS.bos,),
                num=batch["src"].shape[0],
                max_len=max_len,
                options=options,
            )
        )
        for row, n, index in zip(tokens, lengths, indices):
            if index >= 0:
                hypotheses[index] = exp.tokenizer.decode(row[:n].tolist())
        if progress is not None:
            progress(int((indices >= 0).sum()))
    return hypotheses


def translate_lines(
    exp: Experiment,
    params: Params,
    lines: list[str],
    options: DecodeOptions,
    progress: Progress | None = None,
    *,
    seed: int = 0,
) -> list[str]:
    """The translation of each non-blank line, one line each, line i decoded with
    `row_keys(seed, [i])`; blank lines stay blank, and so do lines of more than model.max_len
    source tokens for a model with positions up to it (a Transformer), which cannot read them."""
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    encoded = exp.pairs.src_tokenizer.encode_batch([lines[i] for i in nonblank])
    limit = readable_length(exp.cfg.model)
    fits = [(i, ids) for i, ids in zip(nonblank, encoded) if limit is None or len(ids) <= limit]
    kept = [i for i, _ in fits]
    sources = [np.asarray(ids, np.int32) for _, ids in fits]
    if progress is not None:
        progress(len(lines) - len(kept))
    outputs = [""] * len(lines)
    for i, text in zip(kept, translate_texts(exp, params, sources, options, progress, seed=seed, numbers=kept)):
        outputs[i] = one_line(text)
    return outputs


def translate(
    exp: Experiment,
    params: Params,
    split: str,
    *,
    echo: Callable[[str], None] = print,
    options: DecodeOptions = DecodeOptions(),
) -> dict:
    """Decodes `split`; returns exact match, sacrebleu BLEU and ROUGE, next to copy-the-source."""
    src, _ = exp.pairs.splits[split]
    hypotheses = translate_texts(exp, params, src, options)
    references = exp.pairs.references[split]
    sources = exp.pairs.sources[split]
    samples = [
        {"source": s, "output": h, "reference": r}
        for s, h, r in list(zip(sources, hypotheses, references))[: exp.cfg.train.num_printed_samples]
    ]
    report = {
        "decoding": options.describe(),
        "exact_match": float(np.mean([h == r for h, r in zip(hypotheses, references)])),
        "bleu": corpus_bleu(hypotheses, references),
        "rougeL": rouge(hypotheses, references)["rougeL"],
        "copy_bleu": corpus_bleu(sources, references),
        "copy_rougeL": rouge(sources, references)["rougeL"],
        "samples": samples,
    }
    echo(
        f"{split} ({options.describe()}): exact match {report['exact_match']:.1%}, BLEU {report['bleu']:.2f}, "
        f"ROUGE-L {report['rougeL']:.3f} (copy-the-source: BLEU {report['copy_bleu']:.2f}, "
        f"ROUGE-L {report['copy_rougeL']:.3f})"
    )
    for item in samples:
        echo(f"  {item['source']} -> {item['output']}   (reference {item['reference']})")
    return report
