"""The synthetic tasks' own measures of a trained language model, found by `data.task`.

A task whose data comes from a known source can judge what the model generates: every
sentence of the grammar task is checkable, and the oracle task's generator is an LSTM whose
likelihood of the model's samples is computable. `TASK_REPORTS` maps such a task to its
`report(exp, params, *, echo) -> TaskMeasure`, which prints one line and returns its numbers
and, where it judged texts sampled as a run's printed samples are, those texts; `task_report(cfg)`
finds the one of a run (None for any other data, or a model that does not generate); the
end-of-run report (`evaluation.generation_report`) and `seqjax eval` print it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from seqjax.config import Config
from seqjax.contracts import SPECIAL_IDS, Params
from seqjax.data import is_grammatical
from seqjax.data.corpora.sources import source_of
from seqjax.data.synthetic.oracle import make_oracle, oracle_ids, oracle_nll
from seqjax.models import generates
from seqjax.training.features.continuation import SAMPLING, sample_texts
from seqjax.training.features.generation import DecodeOptions, decode_new_lines

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment


@dataclasses.dataclass(frozen=True)
class TaskMeasure:
    """A task report's numbers (a run's summary keeps them) and the texts it judged when they
    were sampled as a run's printed samples are (`continuation.lm_samples`: SAMPLING, continuation
    i drawn with `row_keys(0, [i])`, up to train.printed_sample_len tokens), else None: the run
    prints its first samples from them instead of decoding them again."""

    numbers: dict[str, float]
    samples: list[str] | None = None


TaskReport = Callable[..., TaskMeasure]  # report(exp, params, *, echo=print) -> TaskMeasure


def grammar_report(
    exp: Experiment, params: Params, *, echo: Callable[[str], None] = print, num: int = 256
) -> TaskMeasure:
    """The fraction of `num` sentences sampled as the printed samples are (train.printed_sample_len
    tokens at most) that the grammar accepts, as "grammatical"; the sentences as its samples."""
    texts = sample_texts(exp, params, num=num)
    report = {"grammatical": float(np.mean([is_grammatical(t) for t in texts]))}
    echo(f"{report['grammatical']:.1%} of {num} sentences ({SAMPLING.describe()}) are grammatical")
    return TaskMeasure(report, texts)


def oracle_report(
    exp: Experiment, params: Params, *, echo: Callable[[str], None] = print, num: int = 1000, seed: int = 0
) -> TaskMeasure:
    """The oracle's NLL of `num` sequences sampled from the model (SeqGAN's measure).

    Each sample is scored on its oracle tokens before the first other token (EOS ends a
    well-formed one), at most the oracle's length; "oracle_nll" is the mean per scored token
    and "oracle_well_formed" the fraction of samples that are exactly the oracle's length.
    """
    oracle, eos = make_oracle(), SPECIAL_IDS.eos
    tokens, _ = decode_new_lines(
        exp, params, num=num, max_len=oracle.length + 1, options=DecodeOptions(sample=True), seed=seed
    )
    ids = oracle_ids(exp.tokenizer.vocab)[tokens]
    scored = np.argmax(np.pad(ids < 0, ((0, 0), (0, 1)), constant_values=True), axis=1)
    lengths = np.minimum(scored, oracle.length)
    kept = lengths > 0
    nll = oracle_nll(oracle, np.maximum(ids[kept, : oracle.length], 0), lengths[kept])
    report = {
        "oracle_nll": float(np.sum(nll * lengths[kept]) / lengths.sum()) if lengths.sum() else float("nan"),
        "oracle_well_formed": float(np.mean((scored == oracle.length) & (tokens[:, oracle.length] == eos))),
    }
    echo(
        f"oracle NLL of {num} samples: {report['oracle_nll']:.3f} nats/token "
        f"({report['oracle_well_formed']:.1%} of them {oracle.length} tokens long)"
    )
    return TaskMeasure(report)


TASK_REPORTS: dict[str, TaskReport] = {"grammar": grammar_report, "oracle": oracle_report}


def task_report(cfg: Config) -> TaskReport | None:
    """The report of the synthetic task `cfg.data` names, None for other data and for a model
    without a decode step (the reports judge samples)."""
    if not source_of(cfg.data).generated or not generates(cfg.model):
        return None
    return TASK_REPORTS.get(cfg.data.task)
