"""`seqjax train`, `eval` and `generate` for a counted model (`seqjax.models.is_trained`
False, `seqjax.contracts.CountedModel`: the n-gram): count the train stream, score valid and
test exactly, decode from it.

A counted model is made on the host: no parameters, steps, devices or checkpoints. It is
evaluated by `evaluation.evaluate` over the batches a neural run is scored on
(`lm_eval_batches`), with a host scorer: every token of a split is a target once, the first
one's history being `</s>`, the end of the line before the split; with train.eval_batches > 0
only the tokens of those first batches. The run directory gets what a neural run writes that
means something here: config.json, the tokenizer, data.json, metrics.jsonl and summary.json,
and the counts themselves (the model's `counts_file`) in place of a checkpoint, which `seqjax
eval` and `seqjax generate` read.

Generation uses the decoders of `seqjax.decoding` unchanged: `counted_decoder` gives them a
step function whose state is each row's last `context_size` tokens and whose distribution over
the vocabulary is computed on the host (the model's `next_token_log_probs`, through
`jax.pure_callback`), so greedy decoding, sampling and beam search all apply.
"""

from __future__ import annotations

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
from seqjax.contracts import SPECIAL_IDS, Batch, CountedModel
from seqjax.data import LMData, holds_pairs, load_data
from seqjax.models import SEQ2SEQ_KINDS, check_own_options, model_class
from seqjax.training.core.logging import RunLogger, data_record, describe_data, save_data_record
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import config_differences
from seqjax.training.core.trackers import open_trackers, validate_trackers
from seqjax.training.features.continuation import DecodeFn
from seqjax.training.features.evaluation import Scorer, describe_metrics, evaluate
from seqjax.training.features.generation import DecodeOptions, run_decoder


def validate_counted_config(cfg: Config) -> None:
    """Raises ValueError for a config a counted model cannot honour (the rule in each message);
    its own model options were checked with every model's (`validate_model_config`)."""
    kind = f"model.kind={cfg.model.kind}"
    check_own_options(cfg.model)
    validate_trackers(cfg.train.loggers)
    if holds_pairs(cfg.data):
        raise ValueError(
            f"{kind} is a language model; data.kind={cfg.data.kind!r} data.task={cfg.data.task!r} "
            f"is sentence-pair data, which needs an encoder-decoder (model.kind in {', '.join(SEQ2SEQ_KINDS)})"
        )
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


def _check_workdir(cfg: Config, run: RunDir) -> None:
    """A workdir may hold this same counted run (it is recounted) but no other run."""
    if not run.has_config:
        return
    diffs = config_differences(config_lib.to_dict(run.config), config_lib.to_dict(cfg))
    if diffs:
        raise ValueError(f"{run.path} holds another run: {'; '.join(diffs)}")


def counted_scorer(model: CountedModel) -> Scorer:
    """score(batch) -> (Σ NLL, tokens) over the unmasked targets of `lm_eval_batches`, called
    on a split's batches in order.

    Those batches hold consecutive chunks of the split (row r of batch i is chunk i·B + r), so
    a chunk's history is the last `context_size` tokens of the chunk before it, and the first
    chunk's is `</s>`: each token is scored as `model.nll_sum` scores it in the whole split.
    """
    keep = model.context_size
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


def train_counted(cfg: Config, workdir: str, *, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Counts the model of `cfg` on the train split and evaluates it.

    Returns the summary it writes: model (its `title`), parameters (the stored counts, the
    model's size where a neural run reports weights), fit_seconds, and valid / test as `evaluation.evaluate`.
    """
    validate_counted_config(cfg)
    run = RunDir(workdir)
    _check_workdir(cfg, run)
    data = cast(LMData, load_data(cfg.data))  # validate_counted_config refused pair data
    vocab_size = data.tokenizer.vocab.size
    clock = time.perf_counter()
    model: CountedModel = model_class(cfg.model).count(cfg.model, data.splits["train"], vocab_size)
    fit_seconds = time.perf_counter() - clock

    os.makedirs(workdir, exist_ok=True)
    run.save_tokenizers(data.tokenizer)
    model.save(run.file(model.counts_file))
    run.write_config(cfg)
    record = data_record(data)
    save_data_record(workdir, record)
    echo(config_text.describe_changes(cfg))
    echo(describe_data(record, cfg.data))
    echo(
        f"{model.title}: {model.size:,} counts from {len(data.splits['train']):,} train tokens "
        f"in {fit_seconds:.1f} s; vocabulary {vocab_size}"
    )
    summary: dict[str, Any] = {"model": model.title, "parameters": model.size, "fit_seconds": fit_seconds}
    logger = RunLogger(workdir, open_trackers(cfg, run))
    try:
        for split in ("valid", "test"):
            if split in data.splits:
                summary[split] = evaluate(cfg, data, split, counted_scorer(model))
                logger.write(0, split, summary[split])
                echo(f"{split}: {describe_metrics(cfg, summary[split])}")
        logger.summary(summary)
    finally:
        logger.close()
    return summary


def saved_counts(cfg: Config, workdir: str) -> CountedModel:
    """The counted model of the run in `workdir` (`cfg`: its config)."""
    model = model_class(cfg.model)
    path = RunDir(workdir).file(model.counts_file)
    if not os.path.isfile(path):
        raise ValueError(
            f"--workdir {workdir} is a counted run without {model.counts_file}: run its seqjax train again"
        )
    return cast(CountedModel, model.load(path))


def counted_decoder(model: CountedModel, options: DecodeOptions) -> DecodeFn:
    """The `continuation.DecodeFn` of a counted model: the decoders over a step function whose
    state is each row's last tokens [B, context_size] int32 (−1: none yet) and whose log-probs
    come from the model's `next_token_log_probs` on the host."""
    width = model.context_size

    def step_fn(history: jax.Array, tokens: jax.Array) -> tuple[jax.Array, jax.Array]:
        history = jnp.concatenate([history, tokens[:, None]], axis=1)[:, 1:]
        shape = jax.ShapeDtypeStruct((history.shape[0], model.vocab_size), jnp.float32)
        return jax.pure_callback(model.next_token_log_probs, shape, history), history

    program = jax.jit(partial(run_decoder, step_fn), static_argnames=("max_len", "options"))

    def decode_fn(
        prompts: np.ndarray, lengths: np.ndarray, keys: jax.Array, max_len: int
    ) -> tuple[np.ndarray, np.ndarray]:
        history = np.full((len(prompts), width), -1, np.int32)
        for row, (prompt, length) in enumerate(zip(prompts, lengths)):
            before = prompt[max(length - 1 - width, 0) : length - 1]
            history[row, width - len(before) :] = before
        last = prompts[np.arange(len(prompts)), np.asarray(lengths) - 1]
        result: tuple[np.ndarray, np.ndarray] = jax.device_get(
            program(history, keys, last, max_len=max_len, options=options)
        )
        return result

    return decode_fn
