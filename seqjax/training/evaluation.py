"""Exact evaluation over a split, and the generated samples shown at the end of a run.

`evaluate` is the one path from a split to {nll, perplexity, tokens, word_perplexity}: it
feeds the split's eval batches to a scorer, `score(batch) -> (nll_sum, tokens)` (a neural
run's jitted eval step, the n-gram's host scorer), and turns the totals into the numbers.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import jax
import numpy as np

from seqjax.config import Config
from seqjax.contracts import SPECIAL_IDS, Batch
from seqjax.data import LMData, ParallelData, holds_pairs, lm_eval_batches, seq2seq_eval_batches
from seqjax.data.oracle import make_oracle, oracle_ids, oracle_nll
from seqjax.training.generation import DecodeOptions, decode, lm_samples, translate

if TYPE_CHECKING:
    from seqjax.training.experiment import Experiment

Scorer = Callable[[Batch], tuple[float, float]]  # batch -> (Σ NLL of its unmasked targets, their count)


def eval_batches(cfg: Config, data: LMData | ParallelData, split: str) -> Iterator[dict[str, np.ndarray]]:
    """The batches of `split` in which every target is scored once (LM: `lm_eval_batches`,
    consecutive chunks of the stream; seq2seq: `seq2seq_eval_batches`), the first
    train.eval_batches of them when that is > 0."""
    if holds_pairs(cfg.data):
        src, tgt = data.splits[split]
        batches = (batch for batch, _ in seq2seq_eval_batches(src, tgt, cfg.train.batch_size, cfg.data.buckets))
    else:
        batches = lm_eval_batches(data.splits[split], cfg.train.batch_size, cfg.data.seq_len)
    return itertools.islice(batches, cfg.train.eval_batches) if cfg.train.eval_batches else batches


def evaluate(cfg: Config, data: LMData | ParallelData, split: str, score: Scorer) -> dict[str, float]:
    """Exact perplexity of `split`: the scorer's NLL summed over `eval_batches`.

    Returns nll (mean per target token), perplexity, tokens, and for LM corpora scored
    whole the per-word perplexity (the same total NLL spread over the split's words).
    """
    sums = [score(batch) for batch in eval_batches(cfg, data, split)]  # device scores run ahead of the host
    nll_sum, tokens = (float(x) for x in np.sum(jax.device_get(sums), axis=0))
    nll = nll_sum / max(tokens, 1.0)
    result = {"nll": nll, "perplexity": float(np.exp(nll)), "tokens": tokens}
    words = getattr(data, "words", {}).get(split)
    if words and not cfg.train.eval_batches:
        result["word_perplexity"] = float(np.exp(nll_sum / words))
    return result


def describe_metrics(result: dict[str, float]) -> str:
    """`nll 1.234, perplexity 3.435, ...`: a result as the run prints it."""
    return ", ".join(f"{k} {v:,.4g}" for k, v in result.items())


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
    tokens, _ = jax.device_get(decode(exp.model, exp.head, params, jax.random.PRNGKey(seed), prompt=(SPECIAL_IDS.eos,),
                                      num=num, max_len=oracle.length + 1, options=DecodeOptions(sample=True)))
    ids = oracle_ids(exp.tokenizer.vocab)[tokens]
    scored = np.argmax(np.pad(ids < 0, ((0, 0), (0, 1)), constant_values=True), axis=1)
    lengths = np.minimum(scored, oracle.length)
    kept = lengths > 0
    nll = oracle_nll(oracle, np.maximum(ids[kept, : oracle.length], 0), lengths[kept])
    report = {
        "oracle_nll": float(np.sum(nll * lengths[kept]) / lengths.sum()) if lengths.sum() else float("nan"),
        "oracle_well_formed": float(np.mean((scored == oracle.length) & (tokens[:, oracle.length] == SPECIAL_IDS.eos))),
    }
    echo(f"oracle NLL of {num} samples: {report['oracle_nll']:.3f} nats/token "
         f"({report['oracle_well_formed']:.1%} of them {oracle.length} tokens long)")
    return report
