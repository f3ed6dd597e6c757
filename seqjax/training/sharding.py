"""Sharding strategies: logical axes of every parameter, mapped onto the mesh axes.

Each float leaf of the train state gets one logical name per dimension from its path
(`PARAMETER_AXES`, first match whose rank fits); a strategy then maps logical names onto
the mesh axes `data` and `model`:

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
The optimizer state mirrors the parameter paths (`.../mu/model/...`), so it is placed by
the same rules; integer leaves (step, counts, PRNG key) are always replicated.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

STRATEGIES = ("data", "fsdp", "tensor", "fsdp_tensor")

# (path suffix pattern, logical axis per dimension); the first pattern whose rank fits wins.
PARAMETER_AXES: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    (r"(^|/)embedding$", ("vocab", "embed")),  # token tables [V, D]
    (r"(^|/)head/weights$", ("vocab", "embed")),  # output word vectors [V, D]
    (r"(^|/)head/biases$", ("vocab",)),
    (r"(^|/)(qkv|kv)/kernel$", ("embed", None, "heads", "head_dim")),  # [D, 3|2, H, Dh]
    (r"(^|/)(qkv|kv)/bias$", (None, "heads", "head_dim")),
    (r"(^|/)query/kernel$", ("embed", "heads", "head_dim")),
    (r"(^|/)query/bias$", ("heads", "head_dim")),
    (r"(^|/)out/kernel$", ("heads", "head_dim", "embed")),  # attention output [H, Dh, D]
    (r"(^|/)ff_in/kernel$", ("embed", "mlp")),
    (r"(^|/)ff_in/bias$", ("mlp",)),
    (r"(^|/)ff_out/kernel$", ("mlp", "embed")),
    (r"(^|/)(input|recurrent)_kernel$", ("embed", "gates")),  # RNN [D, gates·D]
    (r"(^|/)input_bias$", ("gates",)),
    (r"(^|/)kernel$", ("embed", "features")),  # any other Dense [in, out]
    (r"(^|/)(scale|bias)$", ("embed",)),  # LayerNorm, output biases [D]
)

# Logical axes a tensor strategy splits over `model`; True: an error when they do not divide.
TENSOR_AXES = {"heads": True, "mlp": True, "vocab": False}


def validate_strategy(strategy: str, mesh: Mesh) -> None:
    """Host check of a strategy name against the mesh."""
    if strategy not in STRATEGIES:
        raise ValueError(f"train.sharding must be one of {STRATEGIES}, got {strategy!r}")
    if strategy in ("data", "fsdp") and mesh.shape["model"] > 1:
        raise ValueError(
            f"train.sharding={strategy} uses only the data axis, so train.mesh must have model:1 "
            f"(or choose tensor / fsdp_tensor), got {dict(mesh.shape)}"
        )


def path_name(path) -> str:
    """A pytree key path as `a/b/c` (dict keys, attribute names and sequence indices)."""
    parts = []
    for key in path:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
    return "/".join(parts)


def logical_axes(name: str, ndim: int) -> tuple[str | None, ...]:
    """The logical axis of each dimension of the parameter at path `name`."""
    for pattern, axes in PARAMETER_AXES:
        if len(axes) == ndim and re.search(pattern, name):
            return axes
    return ("other",) * ndim  # unknown parameters: only FSDP splits them, on any axis that divides


def _candidates(strategy: str, logical: str | None) -> list[str]:
    axes = []
    if strategy in ("tensor", "fsdp_tensor") and logical in TENSOR_AXES:
        axes.append("model")
    if strategy in ("fsdp", "fsdp_tensor") and logical is not None:
        axes.append("data")
    return axes


def partition_spec(name: str, shape: tuple[int, ...], dtype, strategy: str, mesh: Mesh) -> P:
    """The PartitionSpec of one state leaf under `strategy` on `mesh`.

    Raises:
      ValueError: a tensor strategy would split heads or MLP units unevenly over `model`.
    """
    if not jnp.issubdtype(dtype, jnp.floating):
        return P()
    used: set[str] = set()
    spec: list[str | None] = []
    for size, logical in zip(shape, logical_axes(name, len(shape))):
        choice = None
        for axis in _candidates(strategy, logical):
            parts = mesh.shape[axis]
            if axis in used or parts == 1:
                continue
            if size % parts:
                if axis == "model" and TENSOR_AXES.get(logical, False):
                    raise ValueError(
                        f"train.sharding={strategy} splits {logical} over the model axis: {name} has "
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


def tree_shardings(tree: Any, mesh: Mesh, strategy: str = "data") -> Any:
    """A NamedSharding for every leaf (arrays or jax.ShapeDtypeStruct) of `tree`."""
    validate_strategy(strategy, mesh)

    def place(path, leaf):
        return NamedSharding(mesh, partition_spec(path_name(path), leaf.shape, leaf.dtype, strategy, mesh))

    return jax.tree_util.tree_map_with_path(place, tree)

