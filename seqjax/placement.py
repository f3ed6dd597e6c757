"""Where arrays lie on the mesh a step is traced under, where the compiler's own choice is wrong
or a kernel insists.

A step traced inside `under_mesh` sees its mesh as JAX's abstract mesh context; model code
reads it here and is a no-op without one (a module applied outside a step, or inside a
`shard_map`, whose arrays are already per device).

Where a parameter lies is decided by the logical axes it is created with (`logical_param`, or
`nn.with_logical_partitioning` on a layer's initializer), which the run's strategy maps onto the
mesh (`seqjax.training.core.layout`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh, AxisType, Mesh
from jax.sharding import PartitionSpec as P

Weight = TypeVar("Weight", jax.Array, None)
BATCH_AXES = ("slice", "data")  # the mesh axes a batch is split over, outermost first
HEAD_AXIS = "model"


def logical_param(
    module: nn.Module, name: str, init: Callable[..., jax.Array], axes: tuple[str | None, ...], shape: tuple[int, ...]
) -> jax.Array:
    """The float32 parameter `name` [shape] of `module`, created by `init` with one logical axis
    per dimension (`axes`): `init` returns it boxed with them, the module reads the array."""
    return cast(jax.Array, module.param(name, nn.with_logical_partitioning(init, axes), shape, jnp.float32))


def under_mesh(fn: Callable[..., Any], mesh: Mesh) -> Callable[..., Any]:
    """`fn` traced with `mesh` as the abstract mesh context (what `heads_placement` reads)."""

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            return fn(*args, **kwargs)

    return traced


def context_mesh() -> AbstractMesh | None:
    """The abstract mesh a step is traced under, or None (no step, or inside a shard_map)."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or any(kind == AxisType.Manual for kind in mesh.axis_types):
        return None
    return mesh


def gpu_capability(device: Any) -> tuple[int, int] | None:
    """The CUDA compute capability of `device`, (9, 0) for a Hopper GPU, or None for another
    device (JAX describes a GPU's, and a GPU target's, as "9.0")."""
    if device.platform not in ("gpu", "cuda"):
        return None
    described = getattr(device, "compute_capability", None)
    if described is None:
        return None
    major, minor = str(described).split(".")
    return int(major), int(minor)


def compute_platform() -> str:
    """ "cpu" | "gpu" | "tpu": the platform of the devices the step being traced runs on — its
    mesh's (so a program compiled on a CPU for a GPU target is the GPU's program), else JAX's
    default backend."""
    mesh = jax.sharding.get_abstract_mesh()
    device = None if mesh.empty else getattr(mesh, "abstract_device", None)
    platform = jax.default_backend() if device is None else device.platform
    return "gpu" if platform in ("cuda", "rocm") else platform


def batch_split(mesh: AbstractMesh, rows: int) -> tuple[str, ...]:
    """The mesh's batch axes that split `rows` rows evenly, outermost first; () where there are
    none or they do not divide the rows."""
    batch = tuple(axis for axis in BATCH_AXES if axis in mesh.axis_names and mesh.shape[axis] > 1)
    parts = 1
    for axis in batch:
        parts *= mesh.shape[axis]
    return batch if rows % parts == 0 else ()


def device_rows(rows: int) -> int:
    """The rows of a [rows, ...] batch each device holds under a step's mesh (split over its batch
    axes where they divide it); `rows` itself otherwise. What a per-device choice (a block size, a
    memory limit) is made from: the same rows on each device give the same program at any count."""
    mesh = context_mesh()
    if mesh is None:
        return rows
    parts: int = math.prod(mesh.shape[axis] for axis in batch_split(mesh, rows))
    return rows // parts


def attention_spec(mesh: AbstractMesh, *arrays: jax.Array) -> P:
    """One PartitionSpec for [B, T, heads, Dh] arrays: the batch over the mesh's batch axes
    (where they divide it), the heads over `model` where it divides every array's heads, the
    length and the head width whole."""
    splits = {batch_split(mesh, x.shape[0]) for x in arrays}
    rows = splits.pop() if len(splits) == 1 and () not in splits else None
    split = mesh.shape.get(HEAD_AXIS, 1)
    heads = HEAD_AXIS if split > 1 and all(x.shape[2] % split == 0 for x in arrays) else None
    return P(rows, None, heads, None)


def rows_placement(x: jax.Array) -> jax.Array:
    """Activations [B, ...] constrained to their rows split over the batch axes (the rest whole),
    under a step's mesh; `x` itself otherwise.

    With parameters split along their embedding axis (FSDP), propagation is free to split a
    block's activations the same way and to move them between the two splits with all-to-alls
    at every layer; pinned to the rows at each block's entry, only the parameters move."""
    mesh = context_mesh()
    if mesh is None:
        return x
    batch = batch_split(mesh, x.shape[0])
    if not batch:
        return x
    result: jax.Array = jax.lax.with_sharding_constraint(x, P(batch))
    return result


def gathered(x: Weight) -> Weight:
    """A weight a loop reads at every step, made whole on every device once, before the loop,
    under a step's mesh; `x` itself otherwise (and None).

    Split by FSDP and read inside a loop, it was all-gathered whole at every step by the GPU
    compiler: an LSTM's recurrent kernel at each of its 64 time steps, the output table at each
    of the full softmax's vocabulary blocks (with the gradient written into a [V, D] carry, 1.8
    TiB per train step of an 800k-word LSTM LM on 8 x H100; 10 GiB with the table gathered once
    and the blocks' gradients stacked)."""
    if x is None or context_mesh() is None:
        return x
    return cast(Weight, jax.lax.with_sharding_constraint(x, P()))


def same_placement(*arrays: jax.Array) -> tuple[jax.Array, ...]:
    """[B, T, heads, Dh] arrays constrained to one sharding (`attention_spec`), under a step's mesh.

    cuDNN's fused attention partitions only when queries, keys and values share one sharding
    that splits neither the length nor the head width; left to propagation, grouped-query
    attention under FSDP gets keys and values placed unlike the queries."""
    mesh = context_mesh()
    if mesh is None:
        return arrays
    spec = attention_spec(mesh, *arrays)
    return tuple(jax.lax.with_sharding_constraint(x, spec) for x in arrays)
