"""The training loop: resume or start, step, log, evaluate, checkpoint, summarize.

Everything the run needs is built and validated before the run directory is touched,
so a bad config, file or vocabulary never damages an existing run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from tqdm import tqdm

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.training import distributed, optim
from seqjax.training.checkpoint import Checkpointer, config_differences, dump_json, fingerprint
from seqjax.training.evaluation import evaluate, generation_report
from seqjax.training.mesh import batch_sharding, make_mesh
from seqjax.training.logging import RunLogger
from seqjax.training.memory import describe_memory, memory_report
from seqjax.training.ngram_baseline import NGRAM_KIND, train_ngram
from seqjax.training.parallelism import batch_split, build_train_step, describe_batch, parallel_head, validate_layout
from seqjax.training.setup import TOKENIZER_DIRS, Experiment, build_experiment, saved_tokenizers
from seqjax.training.state import TrainState, init_state, state_shardings
from seqjax.training.steps import make_eval_step


class NonFiniteLoss(RuntimeError):
    pass


def _checkpointer(workdir: str, cfg: Config) -> Checkpointer:
    return Checkpointer(os.path.join(workdir, "checkpoints"), cfg.train.keep_checkpoints)


def open_run(cfg: Config, workdir: str) -> tuple[Experiment, int | None]:
    """Builds the experiment for `workdir`, checking a resumed run's config and vocabulary.

    Returns the experiment and the step to resume from (None for a fresh run).
    """
    ckpt_dir = os.path.join(workdir, "checkpoints")
    latest = None
    if os.path.isdir(ckpt_dir):
        checkpointer = _checkpointer(workdir, cfg)
        latest = checkpointer.latest_step()
        if latest is not None:
            meta = checkpointer.restore_meta(latest)
            diffs = config_differences(meta["config"], config_lib.to_dict(cfg))
            if diffs:
                raise ValueError(f"config does not match the checkpoint in {workdir}: {'; '.join(diffs)}")
            saved = os.path.join(workdir, TOKENIZER_DIRS[0])
            if not os.path.isdir(saved) or fingerprint(saved) != meta["tokenizer"]:
                raise ValueError(f"the vocabulary in {saved} does not match the checkpoint at step {latest}")
        checkpointer.close()
    tokenizers = saved_tokenizers(workdir) if latest is not None else None
    return build_experiment(cfg, tokenizers), latest


def restore_state(
    exp: Experiment, workdir: str, step: int, mesh, example_batch, strategy: str | None = None
) -> tuple[TrainState, dict]:
    """Restores the checkpoint at `step` onto `mesh` under `strategy` (default: the run's
    train.sharding), whatever mesh and strategy wrote it."""
    cfg = exp.cfg
    strategy = cfg.train.sharding if strategy is None else strategy
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    shape = jax.eval_shape(
        lambda: init_state(exp.model, exp.head, optimizer, cfg.train.seed, example_batch, mesh, strategy)
    )
    shardings = state_shardings(shape, mesh, strategy)
    abstract = jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shape, shardings)
    checkpointer = _checkpointer(workdir, cfg)
    state, meta = checkpointer.restore(step, abstract)
    checkpointer.close()
    return state, meta


def pretrained_params(exp: Experiment, source: str, mesh, example_batch):
    """The latest parameters of the run in `source`, which must share data, model and head."""
    path = os.path.join(source, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"train.init_from={source!r} holds no run (no config.json)")
    with open(path) as f:
        saved = config_lib.from_dict(json.load(f))
    for section in ("data", "model", "head"):
        if getattr(saved, section) != getattr(exp.cfg, section):
            raise ValueError(f"train.init_from={source!r} has a different {section} config: {getattr(saved, section)}")
    source_vocab = saved_tokenizers(source)
    source_vocab = source_vocab[1] if isinstance(source_vocab, tuple) else source_vocab
    if source_vocab is None or source_vocab.vocab.to_json() != exp.tokenizer.vocab.to_json():
        raise ValueError(f"train.init_from={source!r} has a different vocabulary")
    step = _checkpointer(source, saved).latest_step()
    if step is None:
        raise ValueError(f"train.init_from={source!r} has no checkpoint")
    source_exp = dataclasses.replace(exp, cfg=saved)
    state, _ = restore_state(source_exp, source, step, mesh, example_batch, exp.cfg.train.sharding)
    return state.params


def train(cfg: Config, workdir: str, *, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Trains (or resumes) the run in `workdir`; returns the summary it also writes.

    In a multi-process run (train.distributed) every process calls this; process 0 alone
    prints, logs and writes the run's files, and all of them write checkpoint shards.
    model.kind=ngram counts the Kneser–Ney baseline instead (`ngram_baseline.train_ngram`).
    """
    if cfg.model.kind == NGRAM_KIND:
        return train_ngram(cfg, workdir, echo=echo)
    distributed.initialize(cfg.train)
    main = distributed.is_main_process()
    echo = echo if main else (lambda _: None)
    exp, resume_step = open_run(cfg, workdir)
    mesh = make_mesh(cfg.train.mesh)
    validate_layout(exp, mesh)
    exp = parallel_head(exp, mesh)
    batches = exp.train_batches()
    example = batches.batch(0)
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)

    if resume_step is not None:
        state, meta = restore_state(exp, workdir, resume_step, mesh, example)
        start = int(meta["data_position"])
        echo(f"resuming {workdir} at step {resume_step}")
    else:
        state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, example, mesh, cfg.train.sharding)
        if cfg.train.init_from:
            state = state.replace(params=pretrained_params(exp, cfg.train.init_from, mesh, example))
            echo(f"parameters initialized from {cfg.train.init_from}")
        start = 0
        if main:
            os.makedirs(workdir, exist_ok=True)
            exp.save_tokenizers(workdir)
            dump_json(os.path.join(workdir, "config.json"), config_lib.to_dict(cfg))
        distributed.barrier("run directory written")
    echo(config_lib.dumps(cfg))
    num_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state.params))
    echo(
        f"{num_params:,} parameters on a mesh {dict(mesh.shape)} over {jax.process_count()} process(es), "
        f"sharding {cfg.train.sharding}, {cfg.train.step_kind} step; vocabulary {exp.tokenizer.vocab.size}"
    )

    train_step = build_train_step(exp, optimizer, schedule, mesh, state)
    eval_step = make_eval_step(exp.model, exp.head, mesh)
    checkpointer = _checkpointer(workdir, cfg)
    tokenizer_print = fingerprint(os.path.join(workdir, TOKENIZER_DIRS[0]))
    sharding = batch_sharding(mesh)
    batch_layout = batch_split(exp, mesh, example)
    abstract_batch = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding) for k, v in example.items()}
    memory = memory_report(train_step, state, abstract_batch)
    echo(describe_batch(batch_layout))
    echo(describe_memory(memory))
    logger = RunLogger(workdir) if main else None
    if main:
        dump_json(os.path.join(workdir, "memory.json"), {"batch": batch_layout, "per_device_bytes": memory})

    def save(state: TrainState, step: int) -> None:
        meta = {"data_position": step, "config": config_lib.to_dict(cfg), "tokenizer": tokenizer_print}
        checkpointer.save(state, meta)

    def run_eval(state: TrainState, split: str, step: int) -> dict[str, float]:
        result = evaluate(exp, eval_step, state.params, split, sharding)
        if main:
            logger.write(step, split, result)
        return result

    t = cfg.train
    pending: list[dict[str, jax.Array]] = []
    tokens_per_step = int(example["mask"].sum())
    bar = tqdm(
        total=t.steps, initial=start, desc="train", unit="step", dynamic_ncols=True, mininterval=0.5, disable=not main
    )
    clock, clock_step = time.perf_counter(), start
    try:
        for step in range(start, t.steps):
            batch = distributed.global_batch(batches, step, sharding)
            state, metrics = train_step(state, batch)
            pending.append(metrics)
            done = step + 1
            boundary = done % t.log_every == 0 or done == t.steps
            checkpoint_now = (t.checkpoint_every and done % t.checkpoint_every == 0) or done == t.steps
            eval_now = t.eval_every and done % t.eval_every == 0 and done != t.steps
            if boundary or checkpoint_now or eval_now:
                fetched = jax.device_get(pending)
                for offset, record in enumerate(fetched):
                    if not math.isfinite(float(record["loss"])):
                        raise NonFiniteLoss(
                            f"loss became {float(record['loss'])} at step {done - len(fetched) + offset + 1}; "
                            "stopping without checkpointing it (lower optim.learning_rate or set optim.clip_norm)"
                        )
                mean = {k: float(np.mean([r[k] for r in fetched])) for k in fetched[-1]}
                now = time.perf_counter()
                mean["tokens_per_sec"] = tokens_per_step * (done - clock_step) / max(now - clock, 1e-9)
                clock, clock_step = now, done
                if main:
                    logger.write(done, "train", mean)
                bar.set_postfix(loss=f"{mean['loss']:.3f}", tok_s=f"{mean['tokens_per_sec']:,.0f}", refresh=False)
                pending = []
            bar.update(1)
            if eval_now:
                result = run_eval(state, "valid", done)
                if main:
                    bar.write(f"step {done}: valid " + ", ".join(f"{k} {v:,.4g}" for k, v in result.items()))
            if checkpoint_now:
                save(state, done)
        bar.close()
        checkpointer.wait()
        summary: dict[str, Any] = {"steps": t.steps, "parameters": num_params}
        for split in ("valid", "test"):
            if split in exp.data.splits:
                summary[split] = run_eval(state, split, t.steps)
                echo(f"{split}: " + ", ".join(f"{k} {v:,.4g}" for k, v in summary[split].items()))
        if jax.process_count() == 1:
            summary["samples"] = generation_report(exp, state.params, echo=echo)
        else:  # decoding runs on process 0 alone, from a host copy of the parameters
            host_params = multihost_utils.process_allgather(state.params, tiled=True)
            summary["samples"] = generation_report(exp, host_params, echo=echo) if main else {}
        if main:
            logger.summary(summary)
        return summary
    finally:
        bar.close()
        checkpointer.wait()
        checkpointer.close()
        if logger is not None:
            logger.close()
