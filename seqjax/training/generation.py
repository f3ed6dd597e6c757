"""Generation glue: composes a model's decode step with a head into the decoders' step function."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from seqjax import decoding
from seqjax.data import BOS_ID, EOS_ID, is_grammatical, seq2seq_eval_batches
from seqjax.metrics import corpus_bleu
from seqjax.objectives.model_io import encoder_kwargs, tied_embedding
from seqjax.training.setup import Experiment


def make_step_fn(model: nn.Module, head: nn.Module, params) -> Callable:
    """step_fn(state, tokens [B] int32) -> (log_probs [B, V] float32, state)."""
    embedding = tied_embedding(head, params)

    def step_fn(state, tokens):
        hidden, state = model.apply({"params": params["model"]}, state, tokens, method="decode_step")
        log_probs = head.apply({"params": params["head"]}, hidden, embedding=embedding, method="log_probs")
        return log_probs, state

    return step_fn


def init_state(model: nn.Module, params, batch_size: int, max_len: int, batch=None):
    kwargs = encoder_kwargs(batch) if batch is not None else {}
    return model.apply({"params": params["model"]}, batch_size, max_len, method="init_decode_state", **kwargs)


def prefill(model: nn.Module, params, state, prefix: jax.Array):
    """Feeds prefix [B, P] int32 (P >= 0) through the decode step, returning the new state."""

    def feed(state, tokens):
        _, state = model.apply({"params": params["model"]}, state, tokens, method="decode_step")
        return state, None

    state, _ = jax.lax.scan(feed, state, prefix.T)
    return state


@partial(jax.jit, static_argnames=("model", "head", "prompt", "num", "max_len", "temperature", "top_k", "top_p"))
def sample_lm(model, head, params, key, *, prompt, num, max_len, temperature=1.0, top_k=None, top_p=None):
    """Samples `num` continuations of `prompt` (a tuple of ids starting with EOS, the LM's line start).

    Returns tokens [num, max_len] int32 (after the prompt, padded after EOS) and lengths [num].
    """
    prefix = jnp.broadcast_to(jnp.asarray(prompt[:-1], jnp.int32), (num, len(prompt) - 1))
    state = prefill(model, params, init_state(model, params, num, len(prompt) + max_len), prefix)
    return decoding.sample(
        make_step_fn(model, head, params), state, key, bos_id=prompt[-1], eos_id=EOS_ID, max_len=max_len,
        temperature=temperature, top_k=top_k, top_p=top_p,
    )


@partial(jax.jit, static_argnames=("model", "head", "max_len"))
def greedy_translate(model, head, params, batch, *, max_len):
    """Greedy decoding of a seq2seq batch: tokens [B, max_len] int32, lengths [B] int32."""
    batch_size = batch["src"].shape[0]
    state = init_state(model, params, batch_size, max_len + 1, batch)
    return decoding.greedy(make_step_fn(model, head, params), state, bos_id=BOS_ID, eos_id=EOS_ID, max_len=max_len)


def lm_samples(exp: Experiment, params, *, echo=print, prompt: str = "", num: int | None = None, seed: int = 0,
               temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> dict:
    """Samples from a language model; on the synthetic grammar also scores how many are grammatical."""
    cfg = exp.cfg.train
    tokenizer = exp.tokenizer
    ids = (EOS_ID, *tokenizer.encode(prompt))  # LM streams separate lines with EOS; it is what precedes a line
    grammar = exp.cfg.data.kind == "synthetic" and exp.cfg.data.task == "grammar"
    num = num or (256 if grammar else cfg.samples)
    tokens, lengths = jax.device_get(
        sample_lm(exp.model, exp.head, params, jax.random.PRNGKey(seed), prompt=ids, num=num, max_len=cfg.sample_len,
                  temperature=temperature, top_k=top_k, top_p=top_p)
    )
    texts = [prompt + tokenizer.decode(row[:n].tolist()) for row, n in zip(tokens, lengths)]
    report: dict = {"samples": texts[: cfg.samples]}
    if grammar:
        report["grammatical"] = float(np.mean([is_grammatical(t) for t in texts]))
        echo(f"{report['grammatical']:.1%} of {num} sampled sentences are grammatical")
    for text in texts[: cfg.samples]:
        echo(f"  sample: {text}")
    return report


def translate(exp: Experiment, params, split: str, *, echo=print) -> dict:
    """Greedy-decodes `split`; returns exact match, sacrebleu BLEU and the copy-the-source BLEU."""
    src, tgt = exp.data.splits[split]
    hypotheses = [""] * len(src)
    for batch, indices in seq2seq_eval_batches(src, tgt, exp.cfg.train.batch_size, exp.cfg.data.buckets):
        tokens, lengths = jax.device_get(
            greedy_translate(exp.model, exp.head, params, batch, max_len=batch["inputs"].shape[1])
        )
        for row, n, index in zip(tokens, lengths, indices):
            if index >= 0:
                hypotheses[index] = exp.tokenizer.decode(row[:n].tolist())
    references = exp.data.references[split]
    sources = exp.data.sources[split]
    report = {
        "exact_match": float(np.mean([h == r for h, r in zip(hypotheses, references)])),
        "bleu": corpus_bleu(hypotheses, references),
        "copy_bleu": corpus_bleu(sources, references),
        "samples": [{"source": s, "output": h, "reference": r} for s, h, r in list(zip(sources, hypotheses, references))[: exp.cfg.train.samples]],
    }
    echo(f"{split}: exact match {report['exact_match']:.1%}, BLEU {report['bleu']:.2f} (copy-the-source {report['copy_bleu']:.2f})")
    for item in report["samples"]:
        echo(f"  {item['source']} -> {item['output']}   (reference {item['reference']})")
    return report
