"""A run's parallel layout: the device mesh, where each array goes on it, and the host
checks that a layout can run, made before anything is traced.

A single device is a mesh of size one; every run, small or large, goes through the same
program. The mesh has three axes, `slice`, `data` and `model`, laid out by `jax.make_mesh`,
which keeps each `model` group on closely connected devices and, in a multi-process run, each
process's devices on a contiguous block of `data`. `slice` (1 unless set) spans TPU slices
joined by the data-center network (DCN): devices of one slice share its `data` and `model`
positions, so the only traffic between slices is what the batch axis needs — the gradient
all-reduce. The batch is split along `slice` and `data` together (`BATCH_AXES`); parameters and
optimizer state are placed by the run's sharding strategy within a slice.

Sharding strategies. Every parameter names its logical axes where its module creates it
(`nn.with_logical_partitioning(init, ("embed", "mlp"))`), so `init` returns each one boxed
(`nn.LogicallyPartitioned`) with a name per dimension (`LOGICAL_AXES`); the state builder
(`seqjax.training.core.state`) places every leaf by those names and unboxes the values. One
table per strategy (`RULES`) maps logical names onto the mesh axes they may be split over:

* `data`        every parameter replicated; the batch split over `data` (data parallel).
* `fsdp`        parameters and optimizer state split over `data` along their first
                dimension that divides; the compiler gathers each layer's weights when
                it needs them (fully sharded data parallel, ZeRO-3).
* `tensor`      attention heads, MLP hidden units and the vocabulary split over `model`
                (Megatron-style column/row-parallel layers); replicated over `data`.
* `fsdp_tensor` both: `model` first, then the remaining dimensions over `data`.

A mesh axis is used at most once per leaf and only where it divides the dimension; the
vocabulary falls back to replication when it does not divide (its size comes from the
data), while heads and MLP width that do not divide under a tensor strategy are an error.
The optimizer state is made from the boxed parameters, so its moments carry their
parameter's boxes and are placed as the parameter is; a moment of another rank than its box
(a factored second moment, as Adafactor's row and column means) or of one element (its
placeholder) is replicated: it holds the sum of its parameter's dimensions, not their
product. Integer leaves (step, counts, PRNG key) and an optimizer's own values (Muon's
Newton–Schulz coefficients) are replicated, and a parameter without logical axes is an error
naming its path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from seqjax.config import HEADS, Config

AXES = ("slice", "data", "model")
BATCH_AXES = ("slice", "data")  # the batch's rows are split over both
STRATEGIES = ("data", "fsdp", "tensor", "fsdp_tensor")
STEP_KINDS = ("jit", "shard_map")

# The logical axes a parameter's dimension may be named (None: never split).
LOGICAL_AXES = (
    "vocab",  # rows of the full vocabulary tables: embeddings and output word vectors [V, D]
    "embed",  # the model width D
    "heads",  # attention heads (query heads, or key/value heads under grouped-query attention)
    "head_dim",  # the width of one head
    "mlp",  # the feed-forward hidden units
    "gates",  # a recurrent layer's gate units (G·D)
    "features",  # the outputs of any other dense layer
    "positions",  # rows of a learned position table
    "classes",  # a head's classes or clusters
    "nodes",  # a tree head's inner nodes
    "words",  # rows of a head's word subsets (the adaptive head's shortlist and tails)
    "layers",  # a scanned stack's layers (model.scan_layers): read one whole layer per step
)
# Logical axes a tensor strategy splits over `model`; True: an error when they do not divide.
TENSOR_AXES = {"heads": True, "mlp": True, "vocab": False}
_DATA_SPLIT = tuple(axis for axis in LOGICAL_AXES if axis not in (*TENSOR_AXES, "layers"))
# One table per strategy: logical axis -> the mesh axes it may be split over, in order of
# preference; an axis it does not name stays whole.
RULES: dict[str, dict[str, tuple[str, ...]]] = {
    "data": {},
    "fsdp": {axis: ("data",) for axis in (*TENSOR_AXES, *_DATA_SPLIT)},
    "tensor": {axis: ("model",) for axis in TENSOR_AXES},
    "fsdp_tensor": {**{axis: ("model", "data") for axis in TENSOR_AXES}, **{axis: ("data",) for axis in _DATA_SPLIT}},
}


# --- the mesh ---------------------------------------------------------------------------


def parse_mesh(spec: str, num_devices: int) -> dict[str, int]:
    """Parses `data:4,model:2` into axis sizes; one size may be -1 (the remaining devices).

    Raises:
      ValueError: unknown axis, malformed entry, or sizes whose product is not `num_devices`.
    """
    sizes: dict[str, int] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, sep, value = part.partition(":")
        if name not in AXES or not sep:
            raise ValueError(f"train.mesh entries must be AXIS:SIZE with AXIS one of {', '.join(AXES)}, got {part!r}")
        try:
            sizes[name] = int(value)
        except ValueError:
            raise ValueError(f"train.mesh size must be an integer, got {part!r}") from None
        if sizes[name] == 0 or sizes[name] < -1:
            raise ValueError(f"train.mesh size must be positive or -1, got {part!r}")
    sizes = {axis: sizes.get(axis, 1) for axis in AXES}
    free = [axis for axis, size in sizes.items() if size == -1]
    if len(free) > 1:
        raise ValueError(f"train.mesh may leave at most one axis as -1, got {spec!r}")
    known = math.prod(size for size in sizes.values() if size != -1)
    if free:
        if num_devices % known:
            raise ValueError(f"train.mesh {spec!r}: {known} does not divide the {num_devices} devices")
        sizes[free[0]] = num_devices // known
    if math.prod(sizes.values()) != num_devices:
        model = sizes["model"] if num_devices % sizes["model"] == 0 else 1
        raise ValueError(
            f"train.mesh {spec!r} needs {math.prod(sizes.values())} devices, but {num_devices} are available: "
            f"e.g. data:{num_devices // model},model:{model}, or data:-1"
        )
    return sizes


def make_mesh(spec: str = "data:-1", devices: Sequence[jax.Device] | None = None) -> Mesh:
    """The mesh of `spec` over `devices` (default: every device of every process).

    Raises:
      ValueError: a `slice` size that is not the number of slices the devices come in.
    """
    devices = list(jax.devices() if devices is None else devices)
    sizes = parse_mesh(spec, len(devices))
    shape = [sizes[a] for a in AXES]
    slices = len({getattr(d, "slice_index", 0) for d in devices})
    if sizes["slice"] != slices:
        raise ValueError(f"train.mesh {spec!r} has slice:{sizes['slice']}, but the devices are in {slices} slice(s)")
    if slices > 1:
        # Each slice's devices laid out alone (ICI), then the slices stacked along `slice` (DCN).
        grid = mesh_utils.create_hybrid_device_mesh([1, *shape[1:]], [slices, 1, 1], devices)
        return Mesh(grid, AXES)
    if devices == jax.devices():
        # Auto axes: shardings are chosen by the program (NamedSharding), not carried by types.
        return jax.make_mesh(shape, AXES, axis_types=(AxisType.Auto,) * len(AXES))
    return Mesh(np.asarray(devices).reshape(shape), AXES)


def batch_shards(mesh: Mesh) -> int:
    """Parts the batch's rows are split into: the slices times the data axis."""
    return math.prod(mesh.shape[axis] for axis in BATCH_AXES)


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) axis split over `slice` and `data`; the rest replicated."""
    return NamedSharding(mesh, P(BATCH_AXES))


# --- where each state leaf goes -----------------------------------------------------------


def path_name(path: Sequence[Any]) -> str:
    """A pytree key path as `a/b/c` (dict keys, attribute names and sequence indices)."""
    parts = []
    for key in path:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
    return "/".join(parts)


def partition_spec(
    logical: Sequence[str | None], shape: tuple[int, ...], strategy: str, mesh: Mesh, name: str = "a parameter"
) -> P:
    """The PartitionSpec under `strategy` on `mesh` of an array of `shape` whose dimensions have
    the logical axes `logical` (`name`, its path, is for the messages).

    Raises:
      ValueError: not one known logical axis (or None) per dimension, or a tensor strategy that
        would split heads or MLP units unevenly over `model`.
    """
    if len(logical) != len(shape):
        raise ValueError(f"{name} names {len(logical)} logical axes {tuple(logical)} for its shape {shape}")
    unknown = [axis for axis in logical if axis is not None and axis not in LOGICAL_AXES]
    if unknown:
        raise ValueError(f"{name} has logical axes {unknown} outside {', '.join(LOGICAL_AXES)}")
    rules = RULES[strategy]
    used: set[str] = set()
    spec: list[str | None] = []
    for size, axis_name in zip(shape, logical):
        choice = None
        for axis in rules.get(axis_name or "", ()):
            parts = mesh.shape[axis]
            if axis in used or parts == 1:
                continue
            if size % parts:
                if axis == "model" and TENSOR_AXES.get(axis_name or "", False):
                    raise ValueError(
                        f"train.sharding={strategy} splits {axis_name} over the model axis: {name} has "
                        f"{size} along it, which must be divisible by model:{parts}"
                    )
                continue
            choice = axis
            used.add(axis)
            break
        spec.append(choice)
    while spec and spec[-1] is None:
        spec.pop()
    return P(*spec)


def _boxed(leaf: Any) -> bool:
    return isinstance(leaf, nn.LogicallyPartitioned)


def tree_shardings(tree: Any, mesh: Mesh, strategy: str = "data") -> Any:
    """A NamedSharding for every leaf of `tree` as `init` makes it (arrays or ShapeDtypeStructs,
    the parameters and their optimizer state boxed in `nn.LogicallyPartitioned`): a boxed leaf
    placed by its logical axes under `strategy`; a factored moment (a box whose leaf has
    other dimensions than axes, or a one-element placeholder), an integer leaf and an
    optimizer's own unboxed values replicated.
    The result has the structure of the unboxed tree (`nn.meta.unbox(tree)`).

    Raises:
      ValueError: a float parameter (under `params/`) without logical axes (its path named), or
        a box whose axes do not fit (`partition_spec`).
    """
    validate_strategy(strategy, mesh)

    def place(path: Sequence[Any], leaf: Any) -> Any:  # a NamedSharding, or an empty node as it is
        name = path_name(path)
        if _boxed(leaf):
            if not jax.tree.leaves(leaf.value):  # a parameter its transform skips (optax's MaskedNode)
                return leaf.value
            if len(leaf.value.shape) != len(leaf.names) or leaf.value.size == 1:
                return NamedSharding(mesh, P())
            return NamedSharding(mesh, partition_spec(leaf.names, leaf.value.shape, strategy, mesh, name))
        if name.startswith("params/") and jnp.issubdtype(leaf.dtype, jnp.floating):
            raise ValueError(
                f"{name} has no logical axes: create it with nn.with_logical_partitioning(init, axes), "
                f"one of {', '.join(LOGICAL_AXES)} (or None) per dimension"
            )
        return NamedSharding(mesh, P())

    return jax.tree_util.tree_map_with_path(place, tree, is_leaf=_boxed)


# --- layout checks --------------------------------------------------------------------------


def validate_strategy(strategy: str, mesh: Mesh) -> None:
    """Host check of a strategy name against the mesh."""
    if strategy not in STRATEGIES:
        raise ValueError(f"train.sharding must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if strategy in ("data", "fsdp") and mesh.shape["model"] > 1:
        raise ValueError(
            f"train.sharding={strategy} uses only the data axis, so train.mesh must have model:1 "
            f"(or choose tensor / fsdp_tensor), got {dict(mesh.shape)}"
        )


def check_shard_map_mesh(mesh: Mesh) -> None:
    if mesh.shape["model"] != 1:
        raise ValueError(
            f"train.step_kind=shard_map is data parallel: train.mesh must have model:1, got {dict(mesh.shape)}"
        )


def check_batch_size(batch_size: int, mesh: Mesh, accum_steps: int = 1) -> None:
    """Every microbatch (batch_size / accum_steps rows) must split evenly over `data`."""
    data = batch_shards(mesh)
    if batch_size % (data * accum_steps):
        times = f" times optim.accum_steps={accum_steps}" if accum_steps > 1 else ""
        raise ValueError(f"train.batch_size must be divisible by the data axis size {data}{times}, got {batch_size}")


def validate_layout(cfg: Config, mesh: Mesh, vocab_size: int) -> None:
    """Raises ValueError for a layout of `cfg` that cannot run on `mesh` with a vocabulary of
    `vocab_size` words: see each message for the rule."""
    t = cfg.train
    validate_strategy(t.sharding, mesh)
    if t.step_kind not in STEP_KINDS:
        raise ValueError(f"train.step_kind must be one of {', '.join(STEP_KINDS)}, got {t.step_kind!r}")
    if t.step_kind == "shard_map":
        check_shard_map_mesh(mesh)
        if t.sharding != "data" or t.vocab_parallel:
            raise ValueError(
                "train.step_kind=shard_map is the data-parallel step: it needs train.sharding=data and "
                f"train.vocab_parallel=false, got sharding={t.sharding!r}, vocab_parallel={t.vocab_parallel}"
            )
    if t.vocab_parallel:
        if cfg.head.kind not in HEADS.family("vocab_parallel"):
            needed = " or ".join(f"head.kind={kind}" for kind in HEADS.family("vocab_parallel"))
            raise ValueError(f"train.vocab_parallel needs {needed}, got {cfg.head.kind!r}")
        if t.sharding not in ("tensor", "fsdp_tensor"):
            raise ValueError(
                f"train.vocab_parallel splits the vocabulary over the model axis: it needs train.sharding "
                f"tensor or fsdp_tensor, got {t.sharding!r}"
            )
        shards = mesh.shape["model"]
        if vocab_size % shards:
            raise ValueError(
                f"train.vocab_parallel needs the vocabulary size divisible by the model axis size {shards}, "
                f"got {vocab_size} (data.vocab_size bounds it)"
            )
    check_batch_size(t.batch_size, mesh, cfg.optim.accum_steps)


# --- how the batch splits -----------------------------------------------------------------


def batch_split(cfg: Config, mesh: Mesh, example: dict) -> dict[str, int]:
    """Rows and target tokens of the effective batch, of one microbatch, and per device.

    Rows and tokens are the example batch's: its rows (train.batch_size, or a token-budget
    batch's, data.max_tokens), its unmasked targets (LM batches are full; seq2seq ones vary
    with padding).
    """
    rows, accum, data = len(example["mask"]), cfg.optim.accum_steps, batch_shards(mesh)
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
