"""Adaptive softmax (Grave et al. 2017), exact and cheaper than the full softmax under jit.

The vocabulary (frequency-sorted) is cut at `cutoffs` = (c_1, ..., c_n): the head is a
softmax over the shortlist [0, c_1) plus one entry per tail cluster; tail cluster i covers
[c_i, c_{i+1}) (c_{n+1} = V) and scores its words from a projection of the hidden state to
D / div^i dimensions (i = 1..n), so p(w | h) = p(cluster(w) | h) · p(w | cluster(w), h).

Static shapes: a tail's rows are data-dependent, so each tail scores its own rows only, in
blocks of TAIL_BLOCK_ROWS rows (`selected_rows.selected_row_losses`): exact for any batch, at
most one block more than the rows the tail really has, instead of every row.
A wide tail is scored in blocks of TAIL_CHUNK words (`full_softmax_loss`'s chunked path):
its projected width is small (D / div^i), so [rows, tail] logits would be memory-bound to
write and read back, and blocks that stay in cache run about twice as fast.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.heads import checks
from seqjax.heads.full import full_softmax_loss
from seqjax.heads.selected_rows import selected_row_losses

TAIL_BLOCK_ROWS = 512  # rows per block of a tail: few loop trips, each a matmul-sized block
TAIL_CHUNK = 4096  # words per block of a tail's softmax (measured best of 1k/4k/16k at d = 32, 128)


def tail_dimensions(features: int, num_clusters: int, div_value: float) -> tuple[int, ...]:
    """Projected widths D // div^i of tail clusters i = 1..n (at least 1), as in PyTorch."""
    features = checks.require_positive_int("features", features)
    if isinstance(div_value, bool) or not isinstance(div_value, (int, float)) or not div_value >= 1.0:
        raise ValueError(f"div_value must be a number >= 1, got {div_value!r}")
    return tuple(max(1, int(features // div_value ** (i + 1))) for i in range(num_clusters))


def adaptive_softmax_loss(
    hidden,
    head_weights,
    tail_projections: Sequence,
    tail_weights: Sequence,
    targets,
    cutoffs: Sequence[int],
):
    """Per-row −log p(target | h) of an adaptive softmax.

    Args:
      hidden: [N, D] float (computed in float32).
      head_weights: [c_1 + n, D] float: the shortlist words' vectors, then one per cluster.
      tail_projections: n arrays [D, d_i] float.
      tail_weights: n arrays [c_{i+1} − c_i, d_i] float (the last one [V − c_n, d_n]).
      targets: [N] int32 ids in [0, V).
      cutoffs: (c_1, ..., c_n), increasing, 0 < c_1 and c_n < V.

    Returns:
      [N] float32 losses.
    """
    cutoffs, bounds = _validate(hidden, head_weights, tail_projections, tail_weights, cutoffs)
    checks.require_hidden_and_targets(hidden, targets, bounds[-1])
    hidden, targets = jnp.asarray(hidden, jnp.float32), jnp.asarray(targets)
    shortlist = cutoffs[0]
    cluster = jnp.searchsorted(jnp.asarray(cutoffs, jnp.int32), targets, side="right")  # 0: shortlist
    head_targets = jnp.where(cluster == 0, targets, shortlist + cluster - 1)
    losses = full_softmax_loss(hidden, head_weights, None, head_targets)
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        in_tail = cluster == index + 1
        local_targets = targets - bounds[index]
        projection = jnp.asarray(projection, jnp.float32)
        weights = jnp.asarray(weights, jnp.float32)
        losses = losses + _tail_losses(hidden, projection, weights, local_targets, in_tail)
    return losses


def adaptive_log_probs(hidden, head_weights, tail_projections: Sequence, tail_weights: Sequence, cutoffs):
    """Exact normalized log p(w | h) for every word: [N, V] float32."""
    cutoffs, _ = _validate(hidden, head_weights, tail_projections, tail_weights, cutoffs)
    hidden = jnp.asarray(hidden, jnp.float32)
    shortlist = cutoffs[0]
    head_log_probs = jax.nn.log_softmax(hidden @ jnp.asarray(head_weights, jnp.float32).T, axis=1)
    parts = [head_log_probs[:, :shortlist]]
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        projected = hidden @ jnp.asarray(projection, jnp.float32)
        tail_log_probs = jax.nn.log_softmax(projected @ jnp.asarray(weights, jnp.float32).T, axis=1)
        parts.append(head_log_probs[:, shortlist + index, None] + tail_log_probs)
    return jnp.concatenate(parts, axis=1)


def _tail_losses(hidden, projection, weights, local_targets, in_tail):
    """[N] −log p(w | cluster, h) on the rows in the tail, 0 elsewhere."""
    chunk_size = TAIL_CHUNK if weights.shape[0] > TAIL_CHUNK else None

    def row_losses(hidden, params, targets):
        projection, weights = params
        return full_softmax_loss(hidden @ projection, weights, None, targets, chunk_size=chunk_size)

    targets = jnp.where(in_tail, local_targets, 0)
    return selected_row_losses(row_losses, TAIL_BLOCK_ROWS, hidden, (projection, weights), targets, in_tail)


def _validate(hidden, head_weights, tail_projections, tail_weights, cutoffs):
    """Checks shapes against the cutoffs; returns the cutoffs and the cluster bounds (c_1..c_n, V)."""
    checks.require_rank("hidden", hidden, 2)
    features = np.shape(hidden)[1]
    if len(tail_projections) != len(tail_weights):
        raise ValueError(
            f"tail_projections and tail_weights must have one entry per cluster, got "
            f"{len(tail_projections)} and {len(tail_weights)}"
        )
    num_clusters = len(tail_weights)
    values = tuple(cutoffs)
    if len(values) != num_clusters:
        raise ValueError(f"cutoffs must have one entry per tail cluster ({num_clusters}), got {values}")
    vocab_size = (values[-1] + np.shape(tail_weights[-1])[0]) if values else 0
    cutoffs = checks.require_cutoffs(values, vocab_size)
    bounds = cutoffs + (vocab_size,)
    checks.require_table("head_weights", head_weights, cutoffs[0] + num_clusters, features)
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        checks.require_rank(f"tail_projections[{index}]", projection, 2)
        width = np.shape(projection)[1]
        checks.require_table(f"tail_projections[{index}]", projection, features, width)
        checks.require_table(f"tail_weights[{index}]", weights, bounds[index + 1] - bounds[index], width)
    return cutoffs, bounds
