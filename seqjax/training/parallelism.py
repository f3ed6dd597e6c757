"""A run's parallel layout from its config: strategy, step kind, output head, batch split.

Checked once on the host (`validate_layout`) before anything is traced; the loop then asks
this module for the head and the train step the layout calls for.
"""

from __future__ import annotations

import dataclasses

import optax
from jax.sharding import Mesh

from seqjax.heads import FullSoftmax
from seqjax.heads.vocab_parallel import VocabParallelSoftmax
from seqjax.training.mesh import check_batch_size
from seqjax.training.setup import Experiment
from seqjax.training.shard_map_step import check_shard_map_mesh, make_shard_map_train_step
from seqjax.training.sharding import validate_strategy
from seqjax.training.state import TrainState
from seqjax.training.steps import TrainStep, make_train_step

STEP_KINDS = ("jit", "shard_map")


def validate_layout(exp: Experiment, mesh: Mesh) -> None:
    """Raises ValueError for a layout that cannot run: see each message for the rule."""
    cfg = exp.cfg
    t = cfg.train
    validate_strategy(t.sharding, mesh)
    if t.step_kind not in STEP_KINDS:
        raise ValueError(f"train.step_kind must be one of {STEP_KINDS}, got {t.step_kind!r}")
    if t.step_kind == "shard_map":
        check_shard_map_mesh(mesh)
        if t.sharding != "data" or t.vocab_parallel:
            raise ValueError(
                "train.step_kind=shard_map is the data-parallel step: it needs train.sharding=data and "
                f"train.vocab_parallel=false, got sharding={t.sharding!r}, vocab_parallel={t.vocab_parallel}"
            )
    if t.vocab_parallel:
        if cfg.head.kind != "full":
            raise ValueError(f"train.vocab_parallel needs head.kind=full, got {cfg.head.kind!r}")
        if t.sharding not in ("tensor", "fsdp_tensor"):
            raise ValueError(
                f"train.vocab_parallel splits the vocabulary over the model axis: it needs train.sharding "
                f"tensor or fsdp_tensor, got {t.sharding!r}"
            )
        vocab, shards = exp.tokenizer.vocab.size, mesh.shape["model"]
        if vocab % shards:
            raise ValueError(
                f"train.vocab_parallel needs the vocabulary size divisible by the model axis size {shards}, "
                f"got {vocab} (data.vocab_size bounds it)"
            )
    check_batch_size(t.batch_size, mesh, cfg.optim.accum_steps)


def parallel_head(exp: Experiment, mesh: Mesh) -> Experiment:
    """The experiment with a vocabulary-parallel output layer when the config asks for one.

    The head keeps FullSoftmax's parameters, so checkpoints are shared with unsharded runs.
    """
    if not exp.cfg.train.vocab_parallel:
        return exp
    if not isinstance(exp.head, FullSoftmax):
        raise ValueError(f"train.vocab_parallel needs the full softmax head, got {type(exp.head).__name__}")
    head = VocabParallelSoftmax(vocab_size=exp.head.vocab_size, tied=exp.head.tied, mesh=mesh)
    return dataclasses.replace(exp, head=head)


def build_train_step(
    exp: Experiment,
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    mesh: Mesh,
    state: TrainState,
) -> TrainStep:
    """The jit step under the configured strategy, or the explicit shard_map step."""
    t = exp.cfg.train
    args = (exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state)
    if t.step_kind == "shard_map":
        return make_shard_map_train_step(*args, accum_steps=exp.cfg.optim.accum_steps)
    return make_train_step(*args, accum_steps=exp.cfg.optim.accum_steps, strategy=t.sharding)


def batch_split(exp: Experiment, mesh: Mesh, example: dict) -> dict[str, int]:
    """Rows and target tokens of the effective batch, of one microbatch, and per device.

    Tokens count the example batch's unmasked targets (LM batches are full; seq2seq ones
    vary with padding).
    """
    rows, accum, data = exp.cfg.train.batch_size, exp.cfg.optim.accum_steps, mesh.shape["data"]
    tokens = int(example["mask"].sum())
    return {
        "effective_rows": rows,
        "effective_tokens": tokens,
        "accum_steps": accum,
        "micro_rows": rows // accum,
        "micro_tokens": tokens // accum,
        "device_micro_rows": rows // accum // data,
        "device_micro_tokens": tokens // accum // data,
    }


def describe_batch(split: dict[str, int]) -> str:
    return (
        f"batch: effective {split['effective_rows']:,} rows / {split['effective_tokens']:,} tokens per update, "
        f"{split['accum_steps']} microbatch(es) of {split['micro_rows']:,} rows / {split['micro_tokens']:,} tokens; "
        f"per device {split['device_micro_rows']:,} rows / {split['device_micro_tokens']:,} tokens per microbatch"
    )
