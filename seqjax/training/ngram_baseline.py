"""`seqjax train` for model.kind=ngram: count the train stream, score valid and test exactly.

The Kneser–Ney model (`seqjax.models.ngram`) is counted on the host: no parameters, steps,
devices or checkpoints. Its evaluation counts the tokens the neural one counts
(`lm_eval_batches`): every token of a split is a target once, the first one's history
being `</s>`, the end of the line before the split; with train.eval_batches > 0 only the
tokens of those first batches. The run directory gets what a neural run writes that means
something here: config.json, the tokenizer, metrics.jsonl and summary.json.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.data import EOS_ID, LMData, holds_pairs, load_data
from seqjax.models import SEQ2SEQ_KINDS, ngram
from seqjax.training.experiment import TOKENIZER_DIRS
from seqjax.training.logging import RunLogger
from seqjax.training.state import config_differences, dump_json

NGRAM_KIND = "ngram"


def validate_ngram_config(cfg: Config) -> None:
    """Raises ValueError for a config the n-gram baseline cannot honour (the rule in each message)."""
    if holds_pairs(cfg.data):
        raise ValueError(
            f"model.kind=ngram is a language model; data.kind={cfg.data.kind!r} data.task={cfg.data.task!r} "
            f"is sentence-pair data, which needs an encoder-decoder (model.kind in {', '.join(SEQ2SEQ_KINDS)})"
        )
    context = cfg.model.context
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ValueError(f"model.context must be an int >= 0 (the n-gram order - 1) for model.kind=ngram, got {context!r}")
    if cfg.head.kind != "full":
        raise ValueError(f"head.kind={cfg.head.kind!r} does not apply to model.kind=ngram: it has no output layer")
    if cfg.objective.kind != "teacher_forcing":
        raise ValueError(
            f"objective.kind={cfg.objective.kind!r} does not apply to model.kind=ngram: it is counted, not trained"
        )
    t = cfg.train
    if t.init_from:
        raise ValueError(f"train.init_from={t.init_from!r} does not apply to model.kind=ngram: it has no parameters")
    if t.distributed:
        raise ValueError("train.distributed does not apply to model.kind=ngram: it is counted on one host")
    if t.batch_size < 1 or t.eval_batches < 0:
        raise ValueError(
            f"train.batch_size must be >= 1 and train.eval_batches >= 0, got {t.batch_size} and {t.eval_batches}"
        )


def _check_workdir(cfg: Config, workdir: str) -> None:
    """A workdir may hold this same n-gram run (it is recounted) but no other run."""
    path = os.path.join(workdir, "config.json")
    if not os.path.isfile(path):
        return
    with open(path) as f:
        diffs = config_differences(json.load(f), config_lib.to_dict(cfg))
    if diffs:
        raise ValueError(f"{workdir} holds another run: {'; '.join(diffs)}")


def evaluate_ngram(model: ngram.KneserNeyLM, data: LMData, split: str, cfg: Config) -> dict[str, float]:
    """Exact NLL of `split` over the tokens `seqjax.training.evaluation.evaluate` counts.

    Returns nll (mean nats per token), perplexity, tokens, and word_perplexity (the same
    total NLL over the split's words) when the whole split is scored — the keys of `evaluate`.
    """
    stream = data.splits[split]
    if cfg.train.eval_batches:
        stream = stream[: cfg.train.eval_batches * cfg.train.batch_size * cfg.data.seq_len]
    nll_sum = model.nll_sum(stream, history=(EOS_ID,))
    tokens = len(stream)
    result = {"nll": nll_sum / tokens, "perplexity": math.exp(nll_sum / tokens), "tokens": float(tokens)}
    words = data.words.get(split)
    if words and not cfg.train.eval_batches:
        result["word_perplexity"] = math.exp(nll_sum / words)
    return result


def train_ngram(cfg: Config, workdir: str, *, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Counts a Kneser–Ney model of order model.context + 1 on the train split and evaluates it.

    Returns the summary it writes: order, parameters (stored n-gram counts, the model's size
    where a neural run reports weights), fit_seconds, and valid / test as `evaluate_ngram`.
    """
    validate_ngram_config(cfg)
    _check_workdir(cfg, workdir)
    data = load_data(cfg.data)
    vocab_size = data.tokenizer.vocab.size
    order = cfg.model.context + 1
    clock = time.perf_counter()
    model = ngram.fit(data.splits["train"], order, vocab_size=vocab_size)
    fit_seconds = time.perf_counter() - clock
    num_counts = sum(len(counts) for table in model.tables for counts, _, _ in table.values())

    os.makedirs(workdir, exist_ok=True)
    data.tokenizer.save(os.path.join(workdir, TOKENIZER_DIRS[0]))
    dump_json(os.path.join(workdir, "config.json"), config_lib.to_dict(cfg))
    echo(config_lib.dumps(cfg))
    echo(
        f"{order}-gram Kneser–Ney: {num_counts:,} n-gram counts from {len(data.splits['train']):,} train tokens "
        f"in {fit_seconds:.1f} s; vocabulary {vocab_size}"
    )
    summary: dict[str, Any] = {"order": order, "parameters": num_counts, "fit_seconds": fit_seconds}
    logger = RunLogger(workdir)
    try:
        for split in ("valid", "test"):
            if split in data.splits:
                summary[split] = evaluate_ngram(model, data, split, cfg)
                logger.write(0, split, summary[split])
                echo(f"{split}: " + ", ".join(f"{k} {v:,.4g}" for k, v in summary[split].items()))
        logger.summary(summary)
    finally:
        logger.close()
    return summary
