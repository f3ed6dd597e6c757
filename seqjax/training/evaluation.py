"""Exact evaluation over a split, and the generated samples shown at the end of a run."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import jax
import numpy as np

from seqjax.data import EOS_ID
from seqjax.data.oracle import make_oracle, oracle_ids, oracle_nll
from seqjax.metrics import perplexity, word_perplexity
from seqjax.training.generation import DecodeOptions, decode, lm_samples, translate
from seqjax.training.experiment import Experiment


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
    if cfg.num_printed_samples == 0:
        return {}
    if exp.is_seq2seq:
        return translate(exp, params, "valid" if "valid" in exp.data.splits else "train", echo=echo)
    if exp.cfg.data.kind == "synthetic" and exp.cfg.data.task == "oracle":
        return {**lm_samples(exp, params, echo=echo), **oracle_report(exp, params, echo=echo)}
    return lm_samples(exp, params, echo=echo)


def oracle_report(exp: Experiment, params, *, echo: Callable[[str], None] = print, num: int = 1000,
                  seed: int = 0) -> dict:
    """The oracle's NLL of `num` sequences sampled from the model (SeqGAN's measure).

    Each sample is scored on its oracle tokens before the first other token (EOS ends a
    well-formed one), at most the oracle's length; "oracle_nll" is the mean per scored token
    and "oracle_well_formed" the fraction of samples that are exactly the oracle's length.
    """
    oracle = make_oracle()
    tokens, _ = jax.device_get(decode(exp.model, exp.head, params, jax.random.PRNGKey(seed), prompt=(EOS_ID,),
                                      num=num, max_len=oracle.length + 1, options=DecodeOptions(sample=True)))
    ids = oracle_ids(exp.tokenizer.vocab)[tokens]
    scored = np.argmax(np.pad(ids < 0, ((0, 0), (0, 1)), constant_values=True), axis=1)
    lengths = np.minimum(scored, oracle.length)
    kept = lengths > 0
    nll = oracle_nll(oracle, np.maximum(ids[kept, : oracle.length], 0), lengths[kept])
    report = {
        "oracle_nll": float(np.sum(nll * lengths[kept]) / lengths.sum()) if lengths.sum() else float("nan"),
        "oracle_well_formed": float(np.mean((scored == oracle.length) & (tokens[:, oracle.length] == EOS_ID))),
    }
    echo(f"oracle NLL of {num} samples: {report['oracle_nll']:.3f} nats/token "
         f"({report['oracle_well_formed']:.1%} of them {oracle.length} tokens long)")
    return report
