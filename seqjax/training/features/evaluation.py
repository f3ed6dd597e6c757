"""Exact evaluation over a split, and the generated samples shown at the end of a run.

`evaluate` is the one path from a split to {nll, token_perplexity, tokens, word_perplexity}:
it feeds the split's eval batches to a scorer, `score(batch) -> (nll_sum, tokens)` (a neural
run's jitted eval step, the n-gram's host scorer), and turns the totals into the numbers.

The two perplexities spread the same total NLL (nats) over different counts:
token_perplexity = exp(NLL / target tokens), every token the model predicts, the `</s>`
ending each line (LM) or target (seq2seq) included; word_perplexity = exp(NLL / words), the
split's whitespace-separated words (of the reference targets, seq2seq) plus one `</s>` per line
or pair (the Penn Treebank convention), the same count whatever the tokenizer, so char, word
and BPE models, or runs that each built their own BPE, compare on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from seqjax.config import Config
from seqjax.contracts import Objective, Params
from seqjax.data import LMData, ParallelData
from seqjax.models import generates, model_class
from seqjax.objectives import objective_of
from seqjax.training.core.experiment import batch_plan
from seqjax.training.features.continuation import lm_samples
from seqjax.training.features.generation import translate
from seqjax.training.features.task_reports import TaskMeasure, task_report

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment

# batch -> (Σ NLL of its unmasked targets, their count[, {name: further sum}]): a model that one
# objective trains is scored by that objective's `eval_sums` (a bound, masked positions, a second
# direction), whose further sums its `eval_report` reads. A further sum may be an array.
Scorer = Callable[[Mapping[str, Any]], tuple[Any, ...]]


def eval_batches(cfg: Config, data: LMData | ParallelData, split: str) -> Iterator[dict[str, np.ndarray]]:
    """The batches of `split` in which every target is scored once, as the run's `BatchPlan`
    chooses them (each line alone from its start where the model trains on packed or single
    lines), the first train.eval_batches of them when that is > 0."""
    return batch_plan(cfg).eval(data, split)


def evaluate(cfg: Config, data: LMData | ParallelData, split: str, score: Scorer) -> dict[str, float]:
    """Exact perplexity of `split`: the scorer's NLL summed over `eval_batches`.

    Returns nll (mean per target token, nats), token_perplexity, tokens, and for splits scored
    whole the word_perplexity (the same total NLL spread over the split's words, where the NLL
    covers every target: `Objective.scores_every_target`), and what the objective that trains
    the model reports from the split's further sums (`Objective.eval_report`: for a
    latent-variable model, whose nll is −ELBO per token, the KL and the ELBO; for the BiLM the
    backward LM's NLL; for an encoder, scored on masked tokens only, the masked fraction).
    """
    scores = jax.device_get([score(batch) for batch in eval_batches(cfg, data, split)])  # device runs ahead
    nll_sum, tokens = (float(x) for x in np.sum([score[:2] for score in scores], axis=0))
    nll = nll_sum / max(tokens, 1.0)
    result = {"nll": nll, "token_perplexity": float(np.exp(nll)), "tokens": tokens}
    further = scores[0][2] if scores and len(scores[0]) > 2 else {}
    summed = {name: np.sum([score[2][name] for score in scores], axis=0) for name in further}
    sums = {name: float(value) if np.ndim(value) == 0 else value for name, value in summed.items()}
    objective = objective_of(model_class(cfg.model)) or Objective
    result.update(objective.eval_report(nll_sum, tokens, sums))
    words = getattr(data, "words", {}).get(split)
    if words and not cfg.train.eval_batches and objective.scores_every_target:
        result["word_perplexity"] = float(np.exp(nll_sum / words))
    return result


def describe_metrics(cfg: Config, result: dict[str, float]) -> str:
    """`per-token perplexity 3.435 (nll 1.234 nats over 1,544 tokens), per-word perplexity 12.5`:
    an `evaluate` result of a run of `cfg` on one line, as runs and `seqjax eval` print it, with
    the clause its model's objective adds (`Objective.describe_eval`)."""
    line = f"per-token perplexity {result['token_perplexity']:,.4g} (nll {result['nll']:.4g} nats"
    line += f" over {result['tokens']:,.0f} tokens)"
    if "word_perplexity" in result:
        line += f", per-word perplexity {result['word_perplexity']:,.4g}"
    objective = objective_of(model_class(cfg.model)) or Objective
    return line + objective.describe_eval(result)


def generation_report(exp: Experiment, params: Params, *, echo: Callable[[str], None] = print) -> dict:
    """Prints and returns a few generated samples with the task's quality measure: BLEU and
    ROUGE for seq2seq; for a language model the synthetic task's own report
    (`task_reports.task_report`), if it has one, printed before the samples."""
    if exp.cfg.train.num_printed_samples == 0 or not generates(exp.cfg.model):
        return {}
    if exp.is_seq2seq:
        return translate(exp, params, "valid" if "valid" in exp.data.splits else "train", echo=echo)
    report = task_report(exp.cfg)
    measure = report(exp, params, echo=echo) if report is not None else TaskMeasure({})
    return {**lm_samples(exp, params, echo=echo, sampled=measure.samples), **measure.numbers}
