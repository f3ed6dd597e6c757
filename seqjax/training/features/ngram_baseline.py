"""`seqjax train`, `eval` and `generate` for a counted model (`seqjax.models.is_trained`
False: the n-gram): count the train stream, score valid and test exactly, decode from it.

The Kneser–Ney model (`seqjax.models.classic.ngram`) is counted on the host: no parameters, steps,
devices or checkpoints. It is evaluated by `evaluation.evaluate` over the batches a neural
run is scored on (`lm_eval_batches`), with a host scorer: every token of a split is a
target once, the first one's history being `</s>`, the end of the line before the split;
with train.eval_batches > 0 only the tokens of those first batches. The run directory gets
what a neural run writes that means something here: config.json, the tokenizer,
data.json, metrics.jsonl and summary.json, and the counts themselves (`ngram.npz`, integer
arrays) in place of a checkpoint, which `seqjax eval` and `seqjax generate` read.

Generation uses the decoders of `seqjax.decoding` unchanged: `ngram_decoder` gives them a
step function whose state is each row's last order − 1 tokens and whose distribution over
the vocabulary is computed on the host (`next_token_log_probs`, through
`jax.pure_callback`), so greedy decoding, sampling and beam search all apply.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from seqjax import config as config_lib
from seqjax.config import Config, HeadConfig, ObjectiveConfig
from seqjax.config import text as config_text
from seqjax.contracts import SPECIAL_IDS, Batch
from seqjax.data import LMData, holds_pairs, load_data
from seqjax.models import SEQ2SEQ_KINDS, ngram
from seqjax.training.core.experiment import TOKENIZER_DIRS
from seqjax.training.core.logging import RunLogger, data_record, describe_data, save_data_record
from seqjax.training.core.state import config_differences, dump_json
from seqjax.training.features.continuation import DecodeFn
from seqjax.training.features.evaluation import Scorer, describe_metrics, evaluate
from seqjax.training.features.generation import DecodeOptions, run_decoder

COUNTS_FILE = "ngram.npz"


def validate_ngram_config(cfg: Config) -> None:
    """Raises ValueError for a config the n-gram baseline cannot honour (the rule in each message)."""
    kind = f"model.kind={cfg.model.kind}"
    if holds_pairs(cfg.data):
        raise ValueError(
            f"{kind} is a language model; data.kind={cfg.data.kind!r} data.task={cfg.data.task!r} "
            f"is sentence-pair data, which needs an encoder-decoder (model.kind in {', '.join(SEQ2SEQ_KINDS)})"
        )
    context = cfg.model.context
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ValueError(f"model.context must be an int >= 0 (the n-gram order - 1) for {kind}, got {context!r}")
    if cfg.head.kind != HeadConfig.kind:  # the default, which nothing reads
        raise ValueError(f"head.kind={cfg.head.kind!r} does not apply to {kind}: it has no output layer")
    if cfg.objective.kind != ObjectiveConfig.kind:
        raise ValueError(f"objective.kind={cfg.objective.kind!r} does not apply to {kind}: it is counted, not trained")
    t = cfg.train
    if t.init_from:
        raise ValueError(f"train.init_from={t.init_from!r} does not apply to {kind}: it has no parameters")
    if t.distributed:
        raise ValueError(f"train.distributed does not apply to {kind}: it is counted on one host")
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


def ngram_scorer(model: ngram.KneserNeyLM) -> Scorer:
    """score(batch) -> (Σ NLL, tokens) over the unmasked targets of `lm_eval_batches`, called
    on a split's batches in order.

    Those batches hold consecutive chunks of the split (row r of batch i is chunk i·B + r), so
    a chunk's history is the last order − 1 tokens of the chunk before it, and the first
    chunk's is `</s>`: each token is scored as `model.nll_sum` scores it in the whole split.
    """
    keep = model.order - 1
    history = [SPECIAL_IDS.eos]

    def score(batch: Batch) -> tuple[float, int]:
        nonlocal history
        nll_sum, tokens = 0.0, 0
        for targets, mask in zip(np.asarray(batch["targets"]), np.asarray(batch["mask"])):
            chunk = targets[mask > 0].tolist()  # padding (the end of the last batch) scores nothing
            if chunk:
                nll_sum += model.nll_sum(chunk, history=history)
                tokens += len(chunk)
                history = (history + chunk)[-keep:] if keep else []
        return nll_sum, tokens

    return score


def train_ngram(cfg: Config, workdir: str, *, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Counts a Kneser–Ney model of order model.context + 1 on the train split and evaluates it.

    Returns the summary it writes: order, parameters (stored n-gram counts, the model's size
    where a neural run reports weights), fit_seconds, and valid / test as `evaluation.evaluate`.
    """
    validate_ngram_config(cfg)
    _check_workdir(cfg, workdir)
    data = cast(LMData, load_data(cfg.data))  # validate_ngram_config refused pair data
    vocab_size = data.tokenizer.vocab.size
    order = cfg.model.context + 1
    clock = time.perf_counter()
    model = ngram.fit(data.splits["train"], order, vocab_size=vocab_size)
    fit_seconds = time.perf_counter() - clock
    num_counts = sum(len(counts) for table in model.tables for counts, _, _ in table.values())

    os.makedirs(workdir, exist_ok=True)
    data.tokenizer.save(os.path.join(workdir, TOKENIZER_DIRS[0]))
    ngram.save(model, os.path.join(workdir, COUNTS_FILE))
    dump_json(os.path.join(workdir, "config.json"), config_lib.to_dict(cfg))
    record = data_record(data)
    save_data_record(workdir, record)
    echo(config_text.describe_changes(cfg))
    echo(describe_data(record, cfg.data))
    echo(
        f"{order}-gram Kneser–Ney: {num_counts:,} n-gram counts from {len(data.splits['train']):,} train tokens "
        f"in {fit_seconds:.1f} s; vocabulary {vocab_size}"
    )
    summary: dict[str, Any] = {"order": order, "parameters": num_counts, "fit_seconds": fit_seconds}
    logger = RunLogger(workdir)
    try:
        for split in ("valid", "test"):
            if split in data.splits:
                summary[split] = evaluate(cfg, data, split, ngram_scorer(model))
                logger.write(0, split, summary[split])
                echo(f"{split}: {describe_metrics(cfg, summary[split])}")
        logger.summary(summary)
    finally:
        logger.close()
    return summary


def saved_counts(workdir: str) -> ngram.KneserNeyLM:
    """The counts of the n-gram run in `workdir`."""
    path = os.path.join(workdir, COUNTS_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"--workdir {workdir} is an n-gram run without {COUNTS_FILE}: run its seqjax train again")
    return ngram.load(path)


def next_token_log_probs(model: ngram.KneserNeyLM, histories: np.ndarray) -> np.ndarray:
    """log P(· | history) [B, V] float32 for each row of `histories` [B, order − 1] int
    (the most recent token last; −1 for none, before the start of a stream): the
    interpolation of `KneserNeyLM.log_prob` for every token at once."""
    vocab_size, discount = model.vocab_size, model.discount
    out = np.empty((len(histories), vocab_size), np.float32)
    cache: dict[tuple[int, ...], np.ndarray] = {}
    for row, history in enumerate(np.asarray(histories).tolist()):
        context = tuple(t for t in history if t >= 0)
        if context not in cache:
            prob = np.full(vocab_size, 1.0 / vocab_size)
            for k in range(1, len(context) + 2):
                entry = model.tables[k - 1].get(context[len(context) - (k - 1) :])
                if entry is None:
                    continue
                followers, total, distinct = entry
                counts = np.zeros(vocab_size)
                counts[list(followers)] = list(followers.values())
                prob = (np.maximum(counts - discount, 0.0) + discount * distinct * prob) / total
            cache[context] = np.log(prob)
        out[row] = cache[context]
    return out


def ngram_decoder(model: ngram.KneserNeyLM, options: DecodeOptions) -> DecodeFn:
    """The `continuation.DecodeFn` of a counted model: the decoders over a step function whose
    state is each row's last order − 1 tokens [B, order − 1] int32 (−1: none yet) and whose
    log-probs come from `next_token_log_probs` on the host."""
    width = model.order - 1

    def step_fn(history: jax.Array, tokens: jax.Array) -> tuple[jax.Array, jax.Array]:
        history = jnp.concatenate([history, tokens[:, None]], axis=1)[:, 1:]
        shape = jax.ShapeDtypeStruct((history.shape[0], model.vocab_size), jnp.float32)
        return jax.pure_callback(partial(next_token_log_probs, model), shape, history), history

    program = jax.jit(partial(run_decoder, step_fn), static_argnames=("max_len", "options"))

    def decode_fn(
        prompts: np.ndarray, lengths: np.ndarray, keys: jax.Array, max_len: int
    ) -> tuple[np.ndarray, np.ndarray]:
        history = np.full((len(prompts), width), -1, np.int32)
        for row, (prompt, length) in enumerate(zip(prompts, lengths)):
            before = prompt[max(length - 1 - width, 0) : length - 1]
            history[row, width - len(before) :] = before
        last = prompts[np.arange(len(prompts)), np.asarray(lengths) - 1]
        return jax.device_get(program(history, keys, last, max_len=max_len, options=options))

    return decode_fn
