"""Generation glue: chooses a decoder (greedy, sampling, beam search), feeds prompts, and
turns ids back into text with the run's tokenizer. Models and heads meet the decoders in
`seqjax.model_head.make_step_fn`; the counted n-gram brings its own step function
(`ngram_baseline.ngram_decoder`).

Every row of a batch may have its own prompt: `run_decoder` feeds each row's last prompt
token as its first input (the decoders themselves feed every row one static `bos_id`).
`continue_lines` decodes the lines of a file in batches of prompts of one length (each
length is one compiled program) and `translate_lines` buckets sources as evaluation does.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from seqjax import decoding
from seqjax.contracts import SPECIAL_IDS, Head, Model, Params, StepFn
from seqjax.data import Tokenizer, seq2seq_eval_batches
from seqjax.metrics import corpus_bleu, rouge
from seqjax.model_head import init_decode_state, make_step_fn, prefill
from seqjax.models import readable_length

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment

# decode(prompts [B, P] int32, key, max_len) -> (tokens [B, max_len] int32, lengths [B] int32),
# numpy in and out: what `continuations` and `continue_lines` decode with.
DecodeFn = Callable[[np.ndarray, jax.Array, int], tuple[np.ndarray, np.ndarray]]
Progress = Callable[[int], object]  # called with the number of lines just done


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
    step_fn: StepFn, state: Any, key: jax.Array, last: jax.Array, *, max_len: int, options: DecodeOptions
) -> tuple[jax.Array, jax.Array]:
    """Decodes after prompts whose tokens but the last are already in `state`.

    Args:
      step_fn, state: a `seqjax.contracts.StepFn` and its state for B rows.
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
            last_first, carry, key, temperature=options.temperature, top_k=options.top_k, top_p=options.top_p, **common
        )
    return decoding.greedy(last_first, carry, **common)


@partial(jax.jit, static_argnames=("model", "head", "max_len", "options"))
def decode_prompts(
    model: Model,
    head: Head,
    params: Params,
    key: jax.Array,
    prompts: jax.Array,
    batch: Mapping[str, Any] | None = None,
    *,
    max_len: int,
    options: DecodeOptions,
) -> tuple[jax.Array, jax.Array]:
    """Decodes after each row's prompt, for an encoder batch (`batch`'s source) or an LM.

    Args:
      prompts: [B, P] int32, P >= 1; its last column is each row's first input.
      batch: an encoder's source, or a latent-variable model's "latent" z [B, Z]; without one
        such a model decodes from z drawn from the prior N(0, I) with a key split off `key`.

    Returns:
      tokens [B, max_len] int32 (after the prompt, pad after EOS) and lengths [B] int32.
    """
    num, length = prompts.shape
    latent_size = getattr(model, "latent_size", None) if getattr(model, "latent", False) else None
    if latent_size is not None and (batch is None or "latent" not in batch):
        key, latent_key = jax.random.split(key)
        batch = {"latent": jax.random.normal(latent_key, (num, latent_size), jnp.float32)}
    state = prefill(model, params, init_decode_state(model, params, num, length + max_len, batch), prompts[:, :-1])
    return run_decoder(make_step_fn(model, head, params), state, key, prompts[:, -1], max_len=max_len, options=options)


def decode(
    model: Model,
    head: Head,
    params: Params,
    key: jax.Array,
    batch: Mapping[str, Any] | None = None,
    *,
    prompt: Sequence[int],
    num: int,
    max_len: int,
    options: DecodeOptions,
) -> tuple[jax.Array, jax.Array]:
    """Decodes `num` rows after one `prompt` (ids; its last one is fed first), for an encoder batch or an LM.

    Returns tokens [num, max_len] int32 (after the prompt, 0 after EOS) and lengths [num] int32.
    """
    prompts = jnp.broadcast_to(jnp.asarray(prompt, jnp.int32), (num, len(prompt)))
    return decode_prompts(model, head, params, key, prompts, batch, max_len=max_len, options=options)


def model_decoder(exp: Experiment, params: Params, options: DecodeOptions) -> DecodeFn:
    """The `DecodeFn` of a trained language model."""

    def decode_fn(prompts: np.ndarray, key: jax.Array, max_len: int) -> tuple[np.ndarray, np.ndarray]:
        tokens = decode_prompts(
            exp.model, exp.head, params, key, jnp.asarray(prompts), max_len=max_len, options=options
        )
        return jax.device_get(tokens)

    return decode_fn


def decode_new_lines(
    exp: Experiment,
    params: Params,
    key: jax.Array,
    batch: Mapping[str, Any] | None = None,
    *,
    num: int,
    max_len: int,
    options: DecodeOptions,
) -> tuple[np.ndarray, np.ndarray]:
    """`num` lines of a language model, each decoded from `</s>` as a line of the stream starts
    (`batch` as `decode`'s, e.g. a VAE's latents), on the host: tokens [num, max_len] int32 and
    lengths [num] int32."""
    tokens = decode(
        exp.model, exp.head, params, key, batch, prompt=(SPECIAL_IDS.eos,), num=num, max_len=max_len, options=options
    )
    return jax.device_get(tokens)


def one_line(text: str) -> str:
    """`text` with any line break a tokenizer could emit (byte-level BPE has them) made a space."""
    return " ".join(text.splitlines())


def continuations(
    tokenizer: Tokenizer, decode_fn: DecodeFn, prompt: str, *, num: int, max_len: int, seed: int = 0
) -> list[str]:
    """`num` continuations of `prompt` (up to `max_len` tokens), each one text with the prompt
    (`Tokenizer.continue_text`)."""
    ids = np.asarray((SPECIAL_IDS.eos, *tokenizer.encode(prompt)), np.int32)  # LM streams separate lines with EOS
    tokens, lengths = decode_fn(np.tile(ids, (num, 1)), jax.random.PRNGKey(seed), max_len)
    return [tokenizer.continue_text(prompt, row[:n].tolist()) for row, n in zip(tokens, lengths)]


def continue_lines(
    tokenizer: Tokenizer,
    decode_fn: DecodeFn,
    lines: list[str],
    *,
    batch_size: int,
    max_len: int,
    seed: int = 0,
    progress: Progress | None = None,
) -> list[str]:
    """Each non-blank line continued (one line of text with it); blank lines stay blank.

    Lines whose prompts have the same number of tokens are decoded together, `batch_size`
    rows at a time (a short batch repeats its first row, so each length compiles once).
    """
    outputs = [""] * len(lines)
    prompts = {i: (SPECIAL_IDS.eos, *tokenizer.encode(line)) for i, line in enumerate(lines) if line.strip()}
    by_length = collections.defaultdict(list)
    for i, ids in prompts.items():
        by_length[len(ids)].append(i)
    if progress is not None:
        progress(len(lines) - len(prompts))
    key = jax.random.PRNGKey(seed)
    for _, members in sorted(by_length.items()):
        for start in range(0, len(members), batch_size):
            rows = members[start : start + batch_size]
            batch = np.array([prompts[i] for i in rows] + [prompts[rows[0]]] * (batch_size - len(rows)), np.int32)
            key, batch_key = jax.random.split(key)
            tokens, lengths = decode_fn(batch, batch_key, max_len)
            for i, row, n in zip(rows, tokens, lengths):
                outputs[i] = one_line(tokenizer.continue_text(lines[i], row[:n].tolist()))
            if progress is not None:
                progress(len(rows))
    return outputs


def sample_texts(
    exp: Experiment,
    params: Params,
    *,
    prompt: str = "",
    num: int,
    seed: int = 0,
    options: DecodeOptions = DecodeOptions(sample=True),
) -> list[str]:
    """`num` continuations of `prompt` (up to train.printed_sample_len tokens) by a language
    model, each as text that starts with the prompt."""
    decode_fn = model_decoder(exp, params, options)
    return continuations(exp.tokenizer, decode_fn, prompt, num=num, max_len=exp.cfg.train.printed_sample_len, seed=seed)


def lm_samples(
    exp: Experiment,
    params: Params,
    *,
    echo: Callable[[str], None] = print,
    prompt: str = "",
    num: int | None = None,
    seed: int = 0,
    options: DecodeOptions = DecodeOptions(sample=True),
) -> dict:
    """Prints and returns `num` (default train.num_printed_samples) continuations of `prompt`."""
    cfg = exp.cfg.train
    texts = sample_texts(exp, params, prompt=prompt, num=num or cfg.num_printed_samples, seed=seed, options=options)
    for text in texts[: cfg.num_printed_samples]:
        echo(f"  sample: {text}")
    return {"decoding": options.describe(), "samples": texts[: cfg.num_printed_samples]}


def translate_texts(
    exp: Experiment,
    params: Params,
    sources: Sequence[np.ndarray],
    options: DecodeOptions,
    progress: Progress | None = None,
) -> list[str]:
    """Decodes source id arrays with a seq2seq model, bucketed by length as evaluation is;
    returns one detokenized hypothesis each."""
    hypotheses = [""] * len(sources)
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
                jax.random.PRNGKey(0),
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
    exp: Experiment, params: Params, lines: list[str], options: DecodeOptions, progress: Progress | None = None
) -> list[str]:
    """The translation of each non-blank line, one line each; blank lines stay blank, and so do
    lines of more than model.max_len source tokens for a model with positions up to it (a
    Transformer), which cannot read them."""
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    encoded = exp.pairs.src_tokenizer.encode_batch([lines[i] for i in nonblank])
    limit = readable_length(exp.cfg.model)
    fits = [(i, ids) for i, ids in zip(nonblank, encoded) if limit is None or len(ids) <= limit]
    kept = [i for i, _ in fits]
    sources = [np.asarray(ids, np.int32) for _, ids in fits]
    if progress is not None:
        progress(len(lines) - len(kept))
    outputs = [""] * len(lines)
    for i, text in zip(kept, translate_texts(exp, params, sources, options, progress)):
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
