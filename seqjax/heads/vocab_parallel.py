"""Vocabulary-parallel full softmax: the output layer split over a mesh axis, never [N, V].

Device m of the vocabulary axis holds rows [m·V/M, (m+1)·V/M) of the word vectors and
scores only those words. The exact loss `logsumexp_v(s_nv) − s_{n,t_n}` is assembled from
three per-row numbers exchanged over the axis (Megatron-LM's parallel cross-entropy):

    max_n   = pmax_m(max of the shard's scores)
    sum_n   = psum_m(Σ_shard exp(s_nv − max_n))
    s_{n,t} = psum_m(the target's score on the shard that holds it, 0 elsewhere)

so each device holds [N, V/M] scores and moves [N] floats, never the [N, V] matrix.
Gradients come from differentiating through `shard_map`: each shard gets its own block of
(softmax − one-hot), and the hidden-state gradient is summed over the shards.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from seqjax.heads import checks


def _local_loss(hidden: Array, weights: Array, biases: Array, targets: Array, vocab_axis: str) -> Array:
    shard_size = weights.shape[0]
    scores = hidden @ weights.T + biases  # [n, V / M]
    # The max only keeps exp() in range; the loss does not depend on it, so no gradient flows.
    row_max = lax.pmax(lax.stop_gradient(scores.max(axis=1)), vocab_axis)
    sum_exp = lax.psum(jnp.exp(scores - row_max[:, None]).sum(axis=1), vocab_axis)
    local_targets = targets - lax.axis_index(vocab_axis) * shard_size
    held = (local_targets >= 0) & (local_targets < shard_size)
    picked = jnp.take_along_axis(scores, jnp.clip(local_targets, 0, shard_size - 1)[:, None], axis=1)[:, 0]
    target_score = lax.psum(jnp.where(held, picked, 0.0), vocab_axis)
    result: Array = row_max + jnp.log(sum_exp) - target_score
    return result


def vocab_parallel_softmax_loss(
    hidden: ArrayLike,
    weights: ArrayLike,
    biases: ArrayLike | None,
    targets: ArrayLike,
    mesh: Mesh,
    *,
    vocab_axis: str = "model",
    row_axis: str | None = "data",
) -> Array:
    """Per-row full-softmax NLL with the vocabulary split over `vocab_axis` of `mesh`.

    Equal in value and gradient to `full_softmax_loss(hidden, weights, biases, targets)`.

    Args:
      hidden: [N, D] float (computed in float32).
      weights: [V, D] float; V must be divisible by the size of `vocab_axis`.
      biases: [V] float or None.
      targets: [N] int32 ids in [0, V).
      mesh: the device mesh; axes other than `vocab_axis` and `row_axis` see copies.
      vocab_axis: the mesh axis that splits the vocabulary.
      row_axis: a mesh axis that splits the rows (the batch axis), or None; rows are kept
        whole when N is not divisible by its size.

    Returns:
      [N] float32 losses (the caller masks and reduces).
    """
    vocab_size, _ = checks.require_output_layer(hidden, weights, biases, targets)
    if vocab_axis not in mesh.shape:
        raise ValueError(f"vocab_axis must be an axis of the mesh {dict(mesh.shape)}, got {vocab_axis!r}")
    if row_axis is not None and (row_axis not in mesh.shape or row_axis == vocab_axis):
        raise ValueError(f"row_axis must be None or another mesh axis than {vocab_axis!r}, got {row_axis!r}")
    shards = mesh.shape[vocab_axis]
    if vocab_size % shards:
        raise ValueError(
            f"the vocabulary size must be divisible by the {vocab_axis} axis size {shards}, got {vocab_size}"
        )
    if row_axis is not None and np.shape(hidden)[0] % mesh.shape[row_axis]:
        row_axis = None
    hidden, weights = jnp.asarray(hidden, jnp.float32), jnp.asarray(weights, jnp.float32)
    biases = jnp.zeros((vocab_size,), jnp.float32) if biases is None else jnp.asarray(biases, jnp.float32)
    rows, vocab = P(row_axis), P(vocab_axis)
    sharded = jax.shard_map(
        lambda h, w, b, t: _local_loss(h, w, b, t, vocab_axis),
        mesh=mesh,
        in_specs=(rows, vocab, vocab, rows),
        out_specs=rows,
    )
    return sharded(hidden, weights, biases, jnp.asarray(targets, jnp.int32))
