"""Exact evaluation over a split, and the generated samples shown at the end of a run."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import jax
import numpy as np

from seqjax.metrics import perplexity, word_perplexity
from seqjax.training.generation import lm_samples, translate
from seqjax.training.setup import Experiment


def evaluate(exp: Experiment, eval_step, params, split: str, sharding) -> dict[str, float]:
    """Exact perplexity of `split` from the head's normalized log-probs (never a sampled loss).

    Returns nll (mean per target token), perplexity, tokens, and for LM corpora the
    per-word perplexity (same total NLL spread over the split's words).
    """
    batches = exp.eval_batches(split)
    if exp.cfg.train.eval_batches:
        batches = itertools.islice(batches, exp.cfg.train.eval_batches)
    sums = [eval_step(params, jax.device_put(batch, sharding)) for batch in batches]
    nll_sum, tokens = (float(x) for x in np.sum(jax.device_get(sums), axis=0))
    result = {"nll": nll_sum / max(tokens, 1.0), "perplexity": float(perplexity(nll_sum, tokens)), "tokens": tokens}
    words = getattr(exp.data, "words", {}).get(split)
    if words and not exp.cfg.train.eval_batches:
        result["word_perplexity"] = float(word_perplexity(nll_sum, words))
    return result


def generation_report(exp: Experiment, params, *, echo: Callable[[str], None] = print) -> dict:
    """Prints and returns a few generated samples with the task's quality measure."""
    cfg = exp.cfg.train
    if cfg.samples == 0:
        return {}
    if exp.is_seq2seq:
        return translate(exp, params, "valid" if "valid" in exp.data.splits else "train", echo=echo)
    return lm_samples(exp, params, echo=echo)
