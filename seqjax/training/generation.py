"""Generation glue: chooses a decoder (greedy, sampling, beam search), feeds prompts, and
turns ids back into text with the run's tokenizer. Models and heads meet the decoders in
`seqjax.model_head.make_step_fn`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from seqjax import decoding
from seqjax.contracts import SPECIAL_IDS
from seqjax.data import seq2seq_eval_batches
from seqjax.metrics import corpus_bleu, rouge
from seqjax.model_head import init_decode_state, make_step_fn, prefill

if TYPE_CHECKING:
    from seqjax.training.experiment import Experiment


@dataclasses.dataclass(frozen=True)
class DecodeOptions:
    """How to decode: beam > 1 is beam search; otherwise sampling if `sample`, else greedy."""

    beam: int = 1
    length_penalty: float = 0.0
    sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
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


@partial(jax.jit, static_argnames=("model", "head", "prompt", "num", "max_len", "options"))
def decode(model, head, params, key, batch=None, *, prompt, num, max_len, options: DecodeOptions):
    """Decodes `num` rows after `prompt` (ids; its last one is fed first), for an encoder batch or an LM.

    Returns tokens [num, max_len] int32 (after the prompt, 0 after EOS) and lengths [num] int32.
    """
    prefix = jnp.broadcast_to(jnp.asarray(prompt[:-1], jnp.int32), (num, len(prompt) - 1))
    state = prefill(model, params, init_decode_state(model, params, num, len(prompt) + max_len, batch), prefix)
    step_fn = make_step_fn(model, head, params)
    common = dict(bos_id=prompt[-1], eos_id=SPECIAL_IDS.eos, pad_id=SPECIAL_IDS.pad, max_len=max_len)
    if options.beam > 1:
        sequences, _ = decoding.beam_search(
            step_fn, state, beam_size=options.beam, length_penalty=options.length_penalty, **common
        )
        return _best_beam(sequences)
    if options.sample:
        return decoding.sample(
            step_fn, state, key, temperature=options.temperature, top_k=options.top_k, top_p=options.top_p, **common
        )
    return decoding.greedy(step_fn, state, **common)


def sample_texts(
    exp: Experiment,
    params,
    *,
    prompt: str = "",
    num: int,
    seed: int = 0,
    options: DecodeOptions = DecodeOptions(sample=True),
) -> list[str]:
    """`num` continuations of `prompt` (up to train.printed_sample_len tokens) by a language
    model, each as text that starts with the prompt."""
    tokenizer = exp.tokenizer
    ids = (SPECIAL_IDS.eos, *tokenizer.encode(prompt))  # LM streams separate lines with EOS: it precedes a line
    tokens, lengths = jax.device_get(
        decode(
            exp.model,
            exp.head,
            params,
            jax.random.PRNGKey(seed),
            prompt=ids,
            num=num,
            max_len=exp.cfg.train.printed_sample_len,
            options=options,
        )
    )
    return [prompt + tokenizer.decode(row[:n].tolist()) for row, n in zip(tokens, lengths)]


def lm_samples(
    exp: Experiment,
    params,
    *,
    echo=print,
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


def translate_texts(exp: Experiment, params, sources: list[np.ndarray], options: DecodeOptions) -> list[str]:
    """Decodes source id arrays with a seq2seq model; returns one detokenized hypothesis each."""
    hypotheses = [""] * len(sources)
    dummy_targets = [np.zeros(0, np.int32)] * len(sources)
    for batch, indices in seq2seq_eval_batches(sources, dummy_targets, exp.cfg.train.batch_size, exp.cfg.data.buckets):
        src = {"src": batch["src"], "src_mask": batch["src_mask"]}
        max_len = max(exp.cfg.data.max_pair_len, batch["src"].shape[1]) + 1  # static per bucket: bounded compiles
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
    return hypotheses


def translate(exp: Experiment, params, split: str, *, echo=print, options: DecodeOptions = DecodeOptions()) -> dict:
    """Decodes `split`; returns exact match, sacrebleu BLEU and ROUGE, next to copy-the-source."""
    src, _ = exp.data.splits[split]
    hypotheses = translate_texts(exp, params, src, options)
    references = exp.data.references[split]
    sources = exp.data.sources[split]
    report = {
        "decoding": options.describe(),
        "exact_match": float(np.mean([h == r for h, r in zip(hypotheses, references)])),
        "bleu": corpus_bleu(hypotheses, references),
        "rougeL": rouge(hypotheses, references)["rougeL"],
        "copy_bleu": corpus_bleu(sources, references),
        "copy_rougeL": rouge(sources, references)["rougeL"],
        "samples": [
            {"source": s, "output": h, "reference": r}
            for s, h, r in list(zip(sources, hypotheses, references))[: exp.cfg.train.num_printed_samples]
        ],
    }
    echo(
        f"{split} ({options.describe()}): exact match {report['exact_match']:.1%}, BLEU {report['bleu']:.2f}, "
        f"ROUGE-L {report['rougeL']:.3f} (copy-the-source: BLEU {report['copy_bleu']:.2f}, "
        f"ROUGE-L {report['copy_rougeL']:.3f})"
    )
    for item in report["samples"]:
        echo(f"  {item['source']} -> {item['output']}   (reference {item['reference']})")
    return report
