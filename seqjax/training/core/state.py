"""The train state: its creation directly onto the mesh, its checkpoints, and its restore.

The state is built from the parameters as `init` returns them, boxed with their logical axes
(`nn.LogicallyPartitioned`); the optimizer state made from them carries the same boxes. Each
leaf is placed by its axes under the run's strategy (`layout.tree_shardings`) and the values
are unboxed: the state itself, and everything that reads it, holds plain arrays.

A checkpoint holds the state (parameters, optimizer state, step, PRNG key) and a JSON
record of the data position, the resolved config, the tokenizer fingerprint and the token
store's fingerprint (None for generated data). Orbax
writes into a temporary folder and renames it, so a crash never leaves a half-written
checkpoint behind; the last `keep` are kept. Arrays are stored as global arrays, each
process writing the shards it holds, and restored onto whatever shardings the target
state carries: a checkpoint moves between meshes, strategies and process counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax
import orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding

from seqjax import config as config_lib
from seqjax.contracts import Batch, Head, Model
from seqjax.model_head import init_boxed_params
from seqjax.training.core.layout import path_name, tree_shardings

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment

# Keys that may change between a run and its resume without changing what is trained.
RESUMABLE_CHANGES = {
    "train.log_every",
    "train.eval_every",
    "train.eval_batches",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.num_printed_samples",
    "train.printed_sample_len",
    "train.mesh",
    # A checkpoint restores onto any mesh, strategy or number of processes.
    "train.sharding",
    "train.step_kind",
    "train.vocab_parallel",
    "train.distributed",
    "train.coordinator",
    "train.num_processes",
    "train.process_id",
    "train.heartbeat_timeout",
    # Where the token store lies; its fingerprint, checked on resume, says what its ids mean.
    "data.store",
}
# Keys that may change when a run is only evaluated or decoded: any corpus may be read with the
# run's tokenizer (its token store is checked to hold the run's vocabulary).
EVALUATION_CHANGES = {"data.root", "data.train", "data.valid", "data.test"}
# Model keys that change no parameter: a run may start from another's parameters across them.
PARAMETER_FREE_MODEL_KEYS = ("dropout", "attention_kernel", "remat")
# Keys the learning-rate schedule is computed from: a resume that changes them follows
# another schedule than the steps already taken did, so it must be asked for
# (`seqjax train --extend-schedule`).
SCHEDULE_KEYS = {
    "train.steps",
    "optim.learning_rate",
    "optim.schedule",
    "optim.warmup_steps",
    "optim.end_lr_fraction",
}

# A batch read for its keys, shapes and dtypes alone: host (numpy) or device arrays, or
# ShapeDtypeStructs.
ExampleBatch = Mapping[str, Any]


@flax.struct.dataclass
class TrainState:
    """step: [] int32, updates applied; key: the run's base PRNG key (per-step keys fold in `step`)."""

    step: jax.Array
    params: Any
    opt_state: Any
    key: jax.Array


def _initializer(
    model: Model, head: Head, optimizer: optax.GradientTransformation, batch: Batch
) -> Callable[[jax.Array], TrainState]:
    """init(key) -> the fresh TrainState for one example batch's shapes, its parameters and
    their optimizer state boxed with their logical axes."""
    batch = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), batch)

    def init(key: jax.Array) -> TrainState:
        init_key, run_key = jax.random.split(key)
        params = init_boxed_params(model, head, init_key, batch)
        return TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params), run_key)

    return init


def abstract_state(
    model: Model,
    head: Head,
    optimizer: optax.GradientTransformation,
    batch: ExampleBatch,
    mesh: Mesh,
    strategy: str = "data",
) -> TrainState:
    """The initial state's shapes and dtypes as ShapeDtypeStructs carrying their shardings under
    `strategy`: what a step is compiled for without a parameter being made (`batch` may be
    ShapeDtypeStructs too)."""
    boxed = jax.eval_shape(_initializer(model, head, optimizer, batch), jax.random.PRNGKey(0))
    shardings = tree_shardings(boxed, mesh, strategy)
    shape = nn.meta.unbox(boxed)
    result: TrainState = jax.tree.map(
        lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shape, shardings
    )
    return result


def placement(state: TrainState) -> TrainState:
    """The NamedSharding each leaf of a placed state carries: the arrays of `init_state` or
    `restore_state`, or `abstract_state`'s ShapeDtypeStructs; `placement(abstract_state(...))`
    is where `jax.device_put` puts a state made elsewhere (a host copy, imported parameters).

    Raises:
      ValueError: a leaf on no mesh (a host copy: put it by `placement(abstract_state(...))` first).
    """

    def of(path: Any, leaf: Any) -> NamedSharding:
        sharding = getattr(leaf, "sharding", None)
        if not isinstance(sharding, NamedSharding):
            raise ValueError(
                f"state leaf {path_name(path)} lies on no mesh ({type(leaf).__name__}): "
                "put the state by placement(abstract_state(...))"
            )
        return sharding

    shardings: TrainState = jax.tree_util.tree_map_with_path(of, state)
    return shardings


def init_state(
    model: Model,
    head: Head,
    optimizer: optax.GradientTransformation,
    seed: int,
    batch: ExampleBatch,
    mesh: Mesh,
    strategy: str = "data",
) -> TrainState:
    """Builds the initial state inside one jit so that it is created already placed on `mesh`:
    a sharded parameter is never materialized whole on one device."""
    init = _initializer(model, head, optimizer, batch)
    key = jax.random.PRNGKey(seed)  # raw uint32 key data: checkpoints store it as a plain array
    shardings = placement(abstract_state(model, head, optimizer, batch, mesh, strategy))
    result: TrainState = jax.jit(lambda k: nn.meta.unbox(init(k)), out_shardings=shardings)(key)
    return result


class Checkpointer:
    """The checkpoints of one run directory (`<workdir>/checkpoints`).

    Nothing is created on disk before the first `save`: opening the checkpoints of a run
    that has none (a fresh run, or one whose config turns out to be wrong) leaves no trace.
    """

    def __init__(self, directory: str, keep: int):
        self.directory = os.path.abspath(directory)
        self.keep = keep
        self._manager: ocp.CheckpointManager | None = None

    @property
    def manager(self) -> ocp.CheckpointManager:
        if self._manager is None:
            options = ocp.CheckpointManagerOptions(max_to_keep=self.keep, create=True, enable_async_checkpointing=True)
            self._manager = ocp.CheckpointManager(self.directory, options=options)
        return self._manager

    def latest_step(self) -> int | None:
        if self._manager is None and not os.path.isdir(self.directory):
            return None
        result: int | None = self.manager.latest_step()
        return result

    def save(self, state: TrainState, meta: dict[str, Any]) -> None:
        step = int(jax.device_get(state.step))
        self.manager.save(
            step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        )

    def restore_meta(self, step: int) -> dict[str, Any]:
        result: dict[str, Any] = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))[
            "meta"
        ]
        return result

    def restore(self, step: int, abstract_state: TrainState) -> tuple[TrainState, dict[str, Any]]:
        """Restores onto the shardings carried by `abstract_state` (jax.ShapeDtypeStruct leaves)."""
        restored = self.manager.restore(
            step,
            args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()),
        )
        return restored["state"], restored["meta"]

    def wait(self) -> None:
        if self._manager is not None:
            self._manager.wait_until_finished()

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
            self._manager = None


def restore_state(
    exp: Experiment,
    checkpointer: Checkpointer,
    step: int,
    optimizer: optax.GradientTransformation,
    mesh: Mesh,
    example_batch: ExampleBatch,
    strategy: str | None = None,
) -> tuple[TrainState, dict[str, Any]]:
    """The state saved at `step` and its metadata, placed on `mesh` under `strategy` (default:
    the run's train.sharding), whatever mesh and strategy wrote it.

    `optimizer` must be the one that wrote the checkpoint: it gives the optimizer state's
    structure; `example_batch` gives the parameters' shapes.
    """
    strategy = exp.cfg.train.sharding if strategy is None else strategy
    return checkpointer.restore(step, abstract_state(exp.model, exp.head, optimizer, example_batch, mesh, strategy))


def config_differences(saved: dict[str, Any], current: dict[str, Any], *, keys: set[str] | None = None) -> list[str]:
    """`name: checkpoint has A, now B` for each `section.key` whose value differs: among `keys`
    when given, else among those that may not differ on resume (neither `RESUMABLE_CHANGES`
    nor `SCHEDULE_KEYS`). A key the saved config lacks (saved before the key existed) counts as
    its default, under which that run was trained."""
    saved = config_lib.to_dict(config_lib.from_dict(saved))
    out = []
    for section, fields in current.items():
        for key, value in fields.items():
            name = f"{section}.{key}"
            old = saved.get(section, {}).get(key)
            value, old = (list(v) if isinstance(v, tuple) else v for v in (value, old))
            compared = name in keys if keys is not None else name not in RESUMABLE_CHANGES | SCHEDULE_KEYS
            if compared and old != value:
                out.append(f"{name}: checkpoint has {old!r}, now {value!r}")
    return out


def dump_json(path: str, value: Any) -> None:
    """Writes JSON atomically (temp file + rename)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2)
    os.replace(tmp, path)
