"""`seqjax train`: open the run, build it for the layout, then step, log, evaluate,
checkpoint and summarize.

`train(cfg, workdir)` reads top to bottom: initialize the processes; open the run (a
resumed run's config and vocabulary checked against its checkpoint); make the mesh; build
the experiment, whose output head is already the one for the layout; build the optimizer
and its schedule once; build the model under the remat policy `model.remat` resolves to for
the run's devices (`remat.run_remat`); get the state (fresh, restored, or fresh with train.init_from's
parameters); build the steps; loop; evaluate and report. One `Checkpointer` serves the
whole run. Everything is built and validated before the run directory is touched, so a bad
config, file or vocabulary never damages an existing run. A counted model (the n-gram,
`seqjax.models.is_trained` False) takes `counted.train_counted` instead.

A resume must follow the learning-rate schedule the checkpoint was trained under: changing
train.steps or an optim key it depends on (`state.SCHEDULE_KEYS`) is refused unless asked
for (`extend_schedule`, `seqjax train --extend-schedule`). SIGINT or SIGTERM stops the run
after the current step with a checkpoint of it (`signals.StopRequest`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from tqdm import tqdm

from seqjax import config as config_lib
from seqjax import optimizers as optim
from seqjax.config import Config
from seqjax.config import text as config_text
from seqjax.contracts import Batch, Params
from seqjax.data.batching.loader import Loader
from seqjax.heads import build_head
from seqjax.model_head import init_params
from seqjax.models import WHY_PADDED, is_trained, kernel_choice
from seqjax.training.core import distributed, mfu
from seqjax.training.core.experiment import (
    Experiment,
    build_experiment,
)
from seqjax.training.core.layout import batch_sharding, batch_shards, batch_split, describe_batch, make_mesh
from seqjax.training.core.logging import RunLogger, data_record, describe_data, save_data_record
from seqjax.training.core.memory import compiled_memory, describe_memory
from seqjax.training.core.remat import run_remat
from seqjax.training.core.resume import open_run
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.signals import StopRequest, TrainingStopped
from seqjax.training.core.state import (
    PARAMETER_FREE_MODEL_KEYS,
    Checkpointer,
    ExampleBatch,
    TrainState,
    dump_json,
    init_state,
    restore_state,
)
from seqjax.training.core.steps import batch_scorer, build_train_step, compile_train_steps, make_eval_step
from seqjax.training.core.trackers import open_trackers, validate_trackers
from seqjax.training.features.counted import train_counted
from seqjax.training.features.evaluation import describe_metrics, evaluate, generation_report
from seqjax.training.features.pretrained_encoder import with_pretrained_encoder


class NonFiniteLoss(RuntimeError):
    pass


def _flat(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A config section's keys by their dotted names, groups' keys included (`model.rnn_vae.latent_size`)."""
    out = {}
    for key, value in values.items():
        out.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key: value})
    return out


def pretrained_params(exp: Experiment, source: str, mesh: Mesh, example_batch: Batch) -> Params:
    """The latest parameters of the run in `source`, placed on `mesh` under this run's
    train.sharding. The source must have the same vocabularies and model (but for
    `PARAMETER_FREE_MODEL_KEYS`); its output head's parameters are taken where this run's head
    has the same ones (the full softmax, sampled softmax and NCE share [V, D] word vectors and
    [V] biases), and refused otherwise. The data may differ: fine-tuning reads a new corpus."""
    run = RunDir(source, f"train.init_from={source!r}")
    saved = run.config
    free = {key: getattr(exp.cfg.model, key) for key in PARAMETER_FREE_MODEL_KEYS}
    theirs = _flat(config_lib.to_dict(dataclasses.replace(saved.model, **free)), "model.")
    ours = _flat(config_lib.to_dict(exp.cfg.model), "model.")
    differing = [f"{k}: the source's {theirs[k]!r}, this run's {v!r}" for k, v in ours.items() if theirs[k] != v]
    if differing:
        raise ValueError(f"train.init_from={source!r} has another model: {'; '.join(differing)}")
    source_vocab, vocab = run.tokenizers(), exp.data.tokenizers
    pairs = zip(*(v if isinstance(v, tuple) else (v,) for v in (source_vocab, vocab))) if source_vocab else []
    if source_vocab is None or any(a.vocab.to_json() != b.vocab.to_json() for a, b in pairs):
        raise ValueError(f"train.init_from={source!r} has a different vocabulary")
    source_head = build_head(saved.head, exp.tokenizer.vocab.size, np.asarray(exp.tokenizer.vocab.counts))
    checkpointer = run.checkpointer(saved.train.keep_checkpoints)
    try:
        step = checkpointer.latest_step()
        if step is None:
            raise ValueError(f"train.init_from={source!r} has no checkpoint")
        # The source's own optimizer and head: its checkpoint holds their state.
        source_optimizer = optim.make_optimizer(saved.optim, saved.train.steps)
        state, _ = restore_state(
            dataclasses.replace(exp, cfg=saved, head=source_head),
            checkpointer,
            step,
            source_optimizer,
            mesh,
            example_batch,
            exp.cfg.train.sharding,
        )
    finally:
        checkpointer.close()
    own = jax.eval_shape(lambda: init_params(exp.model, exp.head, jax.random.key(0), example_batch))["head"]
    shapes = [jax.tree.map(lambda x: tuple(x.shape), tree) for tree in (state.params["head"], own)]
    if shapes[0] != shapes[1]:
        raise ValueError(
            f"train.init_from={source!r}: head.kind={exp.cfg.head.kind} (tied={exp.cfg.head.tied}) cannot start from "
            f"the source's head.kind={saved.head.kind} (tied={saved.head.tied}): its parameters {shapes[1]} are not "
            f"the source's {shapes[0]}"
        )
    return state.params


def starting_state(
    exp: Experiment,
    workdir: str,
    checkpointer: Checkpointer,
    resume_step: int | None,
    optimizer: optax.GradientTransformation,
    mesh: Mesh,
    example_batch: ExampleBatch,
    *,
    echo: Callable[[str], None],
) -> tuple[TrainState, int]:
    """The state to train from and the data position it is at: the checkpoint at
    `resume_step`, else a fresh state (with train.init_from's parameters, if set) at 0."""
    t = exp.cfg.train
    if resume_step is not None:
        state, meta = restore_state(exp, checkpointer, resume_step, optimizer, mesh, example_batch)
        echo(f"resuming {workdir} at step {resume_step}")
        return state, int(meta["data_position"])
    state = init_state(exp.model, exp.head, optimizer, t.seed, example_batch, mesh, t.sharding)
    if t.init_from:
        state = dataclasses.replace(state, params=pretrained_params(exp, t.init_from, mesh, example_batch))
        echo(f"parameters initialized from {t.init_from}")
    if t.init_encoder_from:
        params = with_pretrained_encoder(exp, state.params, t.init_encoder_from, mesh, echo=echo)
        state = dataclasses.replace(state, params=params)
    return state, 0


def _window_means(fetched: list[dict], done: int, since: float, tokens: float) -> dict[str, float]:
    """The mean of each metric over the fetched steps ending at step `done`, with tokens_per_sec
    over the `tokens` trained since the clock read `since`; raises NonFiniteLoss naming the first step
    whose loss is not finite."""
    for offset, record in enumerate(fetched):
        if not math.isfinite(float(record["loss"])):
            raise NonFiniteLoss(
                f"loss became {float(record['loss'])} at step {done - len(fetched) + offset + 1}; "
                "stopping without checkpointing it (lower optim.learning_rate or set optim.clip_norm)"
            )
    mean = {k: float(np.mean([r[k] for r in fetched])) for k in fetched[-1]}
    mean["tokens_per_sec"] = tokens / max(time.perf_counter() - since, 1e-9)
    return mean


def train(
    cfg: Config, workdir: str, *, echo: Callable[[str], None] = print, extend_schedule: bool = False
) -> dict[str, Any]:
    """Trains (or resumes) the run in `workdir`; returns the summary it also writes.

    In a multi-process run (train.distributed) every process calls this; process 0 alone
    prints, logs and writes the run's files, and all of them write checkpoint shards.
    `extend_schedule`: resume even though train.steps or the optimizer's schedule changed.

    Raises:
      TrainingStopped: SIGINT or SIGTERM arrived; the run stopped after a step and
        checkpointed it (`signals`).
    """
    config_lib.check_choices(cfg)  # before any registry is looked up by a kind
    validate_trackers(cfg.train.loggers)
    if not is_trained(cfg.model):
        return train_counted(cfg, workdir, echo=echo)
    distributed.initialize(cfg.train)
    main = distributed.is_main_process()
    echo = echo if main else (lambda _: None)
    t = cfg.train
    run = RunDir(workdir)
    checkpointer = run.checkpointer(t.keep_checkpoints)
    logger = bar = None
    try:
        with StopRequest() as stop:
            resume_step, tokenizers, schedule_changes = open_run(
                cfg, workdir, checkpointer, extend_schedule=extend_schedule
            )
            mesh = make_mesh(t.mesh)
            saved = {} if resume_step is None else checkpointer.restore_meta(resume_step)
            exp = build_experiment(cfg, mesh, tokenizers, fingerprint=saved.get("store"), echo=echo)
            optimizer = optim.make_optimizer(cfg.optim, t.steps)
            schedule = optim.learning_rate_schedule(cfg.optim, t.steps)
            batches = exp.train_batches(row_multiple=batch_shards(mesh) * cfg.optim.accum_steps)
            example = batches.batch(0)
            exp, remat, ready = run_remat(exp, optimizer, schedule, mesh, batches.shapes, example)
            state, start = starting_state(exp, workdir, checkpointer, resume_step, optimizer, mesh, example, echo=echo)
            if schedule_changes:
                echo(
                    f"--extend-schedule: going on from step {start} under the new learning-rate schedule "
                    f"({'; '.join(schedule_changes)}); the learning rate there is {float(schedule(start)):.3g}"
                )
            data = data_record(exp.data)
            if main:
                os.makedirs(workdir, exist_ok=True)
                if resume_step is None:
                    run.save_tokenizers(exp.tokenizer, exp.pairs.src_tokenizer if exp.is_seq2seq else None)
                # Rewritten on resume too: changed train.* keys and a new schedule are the run's config now.
                run.write_config(cfg)
                save_data_record(workdir, data)
            distributed.barrier("run directory written")
            echo(config_text.describe_changes(cfg))
            attention = kernel_choice(exp.model)
            if attention is not None and attention.padded_heads:
                echo(f"attention: {attention.describe()}: {WHY_PADDED}")
            if attention is not None and attention.fallback:
                echo(f"notice: {attention.fallback}")
            if remat is not None and remat.requested == "auto":
                echo(remat.describe())
            echo(describe_data(data, cfg.data))
            num_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state.params))
            echo(
                f"{num_params:,} parameters on a mesh {dict(mesh.shape)} over {jax.process_count()} process(es), "
                f"sharding {t.sharding}, {t.step_kind} step; vocabulary {exp.tokenizer.vocab.size}"
            )

            train_step = build_train_step(exp, optimizer, schedule, mesh, state)
            eval_step = make_eval_step(exp.model, exp.head, mesh)
            sharding = batch_sharding(mesh)
            rows = distributed.local_rows(sharding, batches.batch_size) if jax.process_count() > 1 else None
            if "loader" in saved:  # where the saved run's loader stood: the next batch is the one it would draw
                loader = Loader.restore(batches, t.steps, saved["loader"], rows=rows)
            else:
                loader = Loader(batches, t.steps, start=start, rows=rows)
            batch_layout = batch_split(cfg, mesh, example)
            listed = ", ".join(f"{rows}x{length}" for rows, length in batches.shapes)
            echo(f"compiling the train step for {len(batches.shapes)} batch shape(s), rows x length: {listed}")
            programs, abstract, seconds = compile_train_steps(
                train_step, state, batches.shapes, example, sharding, ready
            )
            echo(f"compiled in {seconds:.1f} s")
            memory = compiled_memory(programs[example["mask"].shape], state, abstract[example["mask"].shape])
            echo(describe_batch(batch_layout))
            echo(describe_memory(memory))
            tokenizer_print = run.tokenizer_fingerprint()
            if main:
                logger = RunLogger(workdir, open_trackers(cfg, run))
                dump_json(run.file(run.MEMORY), {"batch": batch_layout, "per_device_bytes": memory})

            def run_eval(state: TrainState, split: str, step: int) -> dict[str, float]:
                result = evaluate(cfg, exp.data, split, batch_scorer(eval_step, state.params, mesh))
                if logger is not None:
                    logger.write(step, split, result)
                return result

            def save(state: TrainState, done: int) -> None:
                meta = {
                    "data_position": done,
                    "config": config_lib.to_dict(cfg),
                    "tokenizer": tokenizer_print,
                    "store": exp.data.fingerprint,  # what the ids mean: a resume refuses a store with others
                    "loader": loader.state(),
                }
                checkpointer.save(state, meta)

            head_weights = exp.head.matmul_weights(cfg.model.d_model, np.asarray(exp.tokenizer.vocab.counts))
            pending: list[dict[str, jax.Array]] = []
            # Target tokens and model FLOPs since `since`: batches differ in size and row length under data.max_tokens.
            window_tokens = window_flops = 0.0
            bar = tqdm(
                total=t.steps,
                initial=start,
                desc="train",
                unit="step",
                dynamic_ncols=True,
                mininterval=0.5,
                disable=not main,
            )
            since = time.perf_counter()
            for step in range(start, t.steps):
                local = next(loader)
                global_rows = loader.global_rows(local)
                program = programs[(global_rows, local["mask"].shape[1])]  # compiled above, for every shape
                state, metrics = program(state, distributed.to_global(local, global_rows, sharding))
                # This process's rows stand for the whole batch's, in proportion (exact in one process).
                step_tokens = float(local["mask"].sum()) * global_rows / len(local["mask"])
                window_tokens += step_tokens
                step_flops = mfu.train_flops_per_token(cfg, head_weights, local["inputs"].shape[1])
                window_flops += step_tokens * (step_flops or 0.0)
                pending.append(metrics)
                if len(pending) > 1:  # one step in flight, no more: the bar counts steps done, not dispatched
                    jax.block_until_ready(pending[-2])
                done = step + 1
                boundary = done % t.log_every == 0 or done == t.steps
                checkpoint_now = (t.checkpoint_every and done % t.checkpoint_every == 0) or done == t.steps
                eval_now = t.eval_every and done % t.eval_every == 0 and done != t.steps
                signum = stop.agreed(done, fetched=bool(boundary or checkpoint_now or eval_now))
                if boundary or checkpoint_now or eval_now or signum:  # a stop logs the steps since the last log
                    mean = _window_means(jax.device_get(pending), done, since, window_tokens)
                    per_token = None if step_flops is None else window_flops / max(window_tokens, 1.0)
                    mean.update(mfu.interval_metrics(cfg, mean["tokens_per_sec"], per_token))
                    since, pending, window_tokens, window_flops = time.perf_counter(), [], 0.0, 0.0
                    if logger is not None:
                        logger.write(done, "train", mean)
                    bar.set_postfix(loss=f"{mean['loss']:.3f}", tok_s=f"{mean['tokens_per_sec']:,.0f}", refresh=False)
                bar.update(1)
                if signum:
                    save(state, done)
                    checkpointer.wait()
                    bar.close()
                    stopped = TrainingStopped(done, signum)
                    echo(str(stopped))
                    raise stopped
                if eval_now:
                    result = run_eval(state, "valid", done)
                    if main:
                        bar.write(f"step {done}: valid {describe_metrics(cfg, result)}")
                if checkpoint_now:
                    save(state, done)
            bar.close()
            checkpointer.wait()

        summary: dict[str, Any] = {"steps": t.steps, "parameters": num_params}
        for split in ("valid", "test"):
            if split in exp.data.splits:
                summary[split] = run_eval(state, split, t.steps)
                echo(f"{split}: {describe_metrics(cfg, summary[split])}")
        if jax.process_count() == 1:
            summary["samples"] = generation_report(exp, state.params, echo=echo)
        else:  # decoding runs on process 0 alone, from a host copy of the parameters
            host_params = multihost_utils.process_allgather(state.params, tiled=True)
            summary["samples"] = generation_report(exp, host_params, echo=echo) if main else {}
        if logger is not None:
            logger.summary(summary)
        return summary
    finally:
        if bar is not None:
            bar.close()
        checkpointer.wait()
        checkpointer.close()
        if logger is not None:
            logger.close()
