"""Adaptive softmax (Grave et al. 2017), exact and cheaper than the full softmax under jit.

The vocabulary (frequency-sorted) is cut at `cutoffs` = (c_1, ..., c_n): the head is a
softmax over the shortlist [0, c_1) plus one entry per tail cluster; tail cluster i covers
[c_i, c_{i+1}) (c_{n+1} = V) and scores its words from a projection of the hidden state to
D / div^i dimensions (i = 1..n), so p(w | h) = p(cluster(w) | h) · p(w | cluster(w), h).

Static shapes: a tail's rows are data-dependent, so each tail scores its own rows only. Given
`tail_capacities` (static ints: per batch from its targets, `tail_capacities(targets, cutoffs)`,
four buckets per doubling so that recompilations stay bounded; or once for every batch from the
tails' expected shares, `expected_tail_capacities`, as the Linen head does), each tail gathers
that many rows and autodiff keeps their activations for the backward pass, as torch's eager
autograd does; traced targets beyond a capacity take the blocked path below, so the loss is
exact for every batch. Without capacities each tail walks its rows
in blocks of TAIL_BLOCK_ROWS (`selected_rows.selected_row_losses`): exact for any batch, at
most one block more than the tail's rows, but sorting the rows, padding them to blocks and
re-running each block's forward pass in the backward loop (a loop with a data-dependent trip
count keeps no residuals).
A wide tail is scored in blocks of TAIL_CHUNK words (`full_softmax_loss`'s chunked path):
its projected width is small (D / div^i), so [rows, tail] logits would be memory-bound to
write and read back, and blocks that stay in cache run about twice as fast.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.heads import checks
from seqjax.heads.full import full_softmax_loss
from seqjax.heads.selected_rows import capacity_bucket, selected_row_losses

TAIL_BLOCK_ROWS = 128  # rows per tail block (measured best of 64/128/256/512 at V = 100k: less padding per tail)
TAIL_CHUNK = 4096  # words per block of a tail's softmax (measured best of 1k/4k/16k at d = 32, 128)


def tail_dimensions(features: int, num_clusters: int, div_value: float) -> tuple[int, ...]:
    """Projected widths D // div^i of tail clusters i = 1..n, as PyTorch computes them.

    A width that comes out 0 is refused: PyTorch builds a 0-wide projection there, which
    gives that cluster's words a fixed uniform distribution no training can change.

    Raises:
      ValueError: D or n not a positive int, div_value < 1, or a tail width of 0 (naming the
        cluster, D and div_value).

    Example:
      >>> from seqjax.heads import tail_dimensions
      >>> tail_dimensions(512, 3, 4.0)
      (128, 32, 8)
      >>> tail_dimensions(8, 2, 4.0)
      Traceback (most recent call last):
      ...
      ValueError: tail cluster 2 would project to D // div_value^2 = 0 dimensions (D=8, div_value=4.0)...
    """
    features = checks.require_positive_int("features", features)
    num_clusters = checks.require_positive_int("num_clusters", num_clusters)
    if isinstance(div_value, bool) or not isinstance(div_value, (int, float)) or not div_value >= 1.0:
        raise ValueError(f"div_value must be a number >= 1, got {div_value!r}")
    widths = tuple(int(features // div_value ** (i + 1)) for i in range(num_clusters))
    if 0 in widths:
        cluster = widths.index(0) + 1
        raise ValueError(
            f"tail cluster {cluster} would project to D // div_value^{cluster} = 0 dimensions "
            f"(D={features}, div_value={div_value}): use a wider D, a smaller div_value or fewer cutoffs"
        )
    return widths


def adaptive_softmax_loss(
    hidden: ArrayLike,
    head_weights: ArrayLike,
    tail_projections: Sequence[ArrayLike],
    tail_weights: Sequence[ArrayLike],
    targets: ArrayLike,
    cutoffs: Sequence[int],
    *,
    head_biases: ArrayLike | None = None,
    tail_capacities: Sequence[int] | None = None,
) -> Array:
    """Per-row −log p(target | h) of an adaptive softmax.

    Args:
      hidden: [N, D] float (computed in float32).
      head_weights: [c_1 + n, D] float: the shortlist words' vectors, then one per cluster.
      tail_projections: n arrays [D, d_i] float.
      tail_weights: n arrays [c_{i+1} − c_i, d_i] float (the last one [V − c_n, d_n]).
      targets: [N] int32 ids in [0, V).
      cutoffs: (c_1, ..., c_n), increasing, 0 < c_1 and c_n < V (host ints).
      head_biases: [c_1 + n] float added to the head's scores, or None (PyTorch's
        `head_bias=False`, its default).
      tail_capacities: n static ints >= 1, rows each tail gathers, or None: each tail walks
        its rows in blocks (see the module docstring). Concrete targets must fit them
        (`tail_capacities(targets, cutoffs)` on the host), checked here; traced targets of a
        tail beyond its capacity are scored by that tail's blocked path instead (a `lax.cond`),
        so a capacity chosen from expected shares (`expected_tail_capacities`) stays exact.

    Returns:
      [N] float32 losses.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import adaptive_log_probs, adaptive_softmax_loss, tail_dimensions
      >>> (width,) = tail_dimensions(8, 1, 2.0)  # one tail cluster [10, 30), projected to 4
      >>> rng = np.random.default_rng(0)
      >>> hidden, head = rng.normal(size=(3, 8)), rng.normal(size=(10 + 1, 8))  # shortlist + 1 cluster
      >>> projections, tails = [rng.normal(size=(8, width))], [rng.normal(size=(20, width))]
      >>> targets = np.array([0, 12, 29])
      >>> loss = adaptive_softmax_loss(hidden, head, projections, tails, targets, (10,))
      >>> exact = -adaptive_log_probs(hidden, head, projections, tails, (10,))[np.arange(3), targets]
      >>> loss.shape, loss.dtype, bool(jnp.allclose(loss, exact, rtol=1e-5))
      ((3,), dtype('float32'), True)
    """
    cutoffs, bounds = _validate(hidden, head_weights, tail_projections, tail_weights, cutoffs, head_biases)
    checks.require_hidden_and_targets(hidden, targets, bounds[-1])
    if tail_capacities is not None:
        _require_capacities(tail_capacities, targets, cutoffs)
    hidden, targets = jnp.asarray(hidden, jnp.float32), jnp.asarray(targets)
    shortlist = cutoffs[0]
    cluster = jnp.searchsorted(jnp.asarray(cutoffs, jnp.int32), targets, side="right")  # 0: shortlist
    head_targets = jnp.where(cluster == 0, targets, shortlist + cluster - 1)
    losses = full_softmax_loss(hidden, head_weights, head_biases, head_targets)
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        in_tail = cluster == index + 1
        local_targets = targets - bounds[index]
        projection = jnp.asarray(projection, jnp.float32)
        weights = jnp.asarray(weights, jnp.float32)
        operands = (hidden, projection, weights, local_targets, in_tail)
        if tail_capacities is None:
            losses = losses + _tail_losses(*operands)
        else:
            gathered = functools.partial(_gathered_tail_losses, capacity=tail_capacities[index])
            if checks.is_concrete(targets):  # the capacity was checked above
                losses = losses + gathered(*operands)
            else:  # a batch beyond the capacity takes the blocked path, exact for any batch
                fits = in_tail.sum() <= tail_capacities[index]
                losses = losses + jax.lax.cond(fits, gathered, _tail_losses, *operands)
    return losses


def tail_capacities(targets: ArrayLike, cutoffs: Sequence[int]) -> tuple[int, ...]:
    """Each tail cluster's row capacity for these targets (host): the number of targets in it,
    rounded up by `selected_rows.capacity_bucket` (four buckets per doubling).

    Example:
      >>> from seqjax.heads import tail_capacities
      >>> tail_capacities([0, 5, 12, 13, 14, 40], (10, 30))  # 3 rows in [10, 30), 1 in [30, V)
      (3, 1)
    """
    values = np.asarray(targets)
    checks.require_ids("targets", values, np.iinfo(np.int32).max)
    cluster = np.searchsorted(np.asarray(cutoffs), values, side="right")
    return tuple(capacity_bucket(int((cluster == index + 1).sum())) for index in range(len(cutoffs)))


def expected_tail_capacities(rows: int, tail_shares: Sequence[float], margin: float = 3.0) -> tuple[int, ...]:
    """Each tail cluster's row capacity for any batch of `rows` rows (host), from its expected
    share of the targets (`tail_shares`, e.g. the train split's unigram shares): the binomial mean
    plus `margin` standard deviations, rounded up to a multiple of 8 (one capacity per shape, so
    no buckets). A batch beyond it stays exact (`adaptive_softmax_loss` takes the tail's blocked
    path), so it costs speed, not correctness; at margin 3 an i.i.d. batch needs that path about
    once in 700 per tail, while every row of capacity costs every batch.

    Example:
      >>> from seqjax.heads import expected_tail_capacities
      >>> expected_tail_capacities(2048, (0.2, 0.05))  # means 409.6 and 102.4 rows
      (472, 136)
    """
    rows = checks.require_positive_int("rows", rows)
    capacities = []
    for share in tail_shares:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"tail_shares must be in [0, 1], got {tuple(tail_shares)}")
        mean = rows * share
        bound = mean + margin * math.sqrt(mean * (1.0 - share)) + 1.0
        capacities.append(min(-(-math.ceil(bound) // 8) * 8, rows))
    return tuple(capacities)


def _require_capacities(capacities: Sequence[int], targets: ArrayLike, cutoffs: Sequence[int]) -> None:
    if len(capacities) != len(cutoffs):
        raise ValueError(f"tail_capacities must have one int per tail cluster ({len(cutoffs)}), got {capacities!r}")
    for capacity in capacities:
        checks.require_positive_int("tail_capacities entry", capacity)
    if checks.is_concrete(targets):
        cluster = np.searchsorted(np.asarray(cutoffs), np.asarray(targets), side="right")
        for index, capacity in enumerate(capacities):
            rows = int((cluster == index + 1).sum())
            if rows > capacity:
                raise ValueError(
                    f"tail_capacities[{index}] must hold the {rows} targets in tail cluster {index + 1}, got {capacity}"
                )


def _gathered_tail_losses(
    hidden: Array, projection: Array, weights: Array, local_targets: Array, in_tail: Array, capacity: int
) -> Array:
    """[N] −log p(w | cluster, h) on the rows in the tail (gathered into `capacity` slots), 0 elsewhere."""
    (rows,) = jnp.nonzero(in_tail, size=capacity, fill_value=0)
    valid = jnp.arange(capacity) < in_tail.sum()
    targets = jnp.where(valid, local_targets[rows], 0)
    losses = full_softmax_loss(hidden[rows] @ projection, weights, None, targets, chunk_size=TAIL_CHUNK)
    return jnp.zeros(in_tail.shape, jnp.float32).at[rows].add(jnp.where(valid, losses, 0.0))


def adaptive_log_probs(
    hidden: ArrayLike,
    head_weights: ArrayLike,
    tail_projections: Sequence[ArrayLike],
    tail_weights: Sequence[ArrayLike],
    cutoffs: Sequence[int],
    *,
    head_biases: ArrayLike | None = None,
) -> Array:
    """Exact normalized log p(w | h) for every word: [N, V] float32.

    Arguments as in `adaptive_softmax_loss` (no targets).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from seqjax.heads import adaptive_log_probs
      >>> hidden, head = jnp.ones((2, 4)), jnp.zeros((3 + 1, 4))  # shortlist [0, 3), tail [3, 7)
      >>> projections, tails = [jnp.ones((4, 2))], [jnp.zeros((4, 2))]
      >>> log_probs = adaptive_log_probs(hidden, head, projections, tails, (3,), head_biases=jnp.zeros(4))
      >>> log_probs.shape, bool(jnp.allclose(jnp.exp(log_probs).sum(axis=1), 1.0))
      ((2, 7), True)
    """
    cutoffs, _ = _validate(hidden, head_weights, tail_projections, tail_weights, cutoffs, head_biases)
    hidden = jnp.asarray(hidden, jnp.float32)
    shortlist = cutoffs[0]
    head_scores = hidden @ jnp.asarray(head_weights, jnp.float32).T
    if head_biases is not None:
        head_scores = head_scores + jnp.asarray(head_biases, jnp.float32)
    head_log_probs = jax.nn.log_softmax(head_scores, axis=1)
    parts = [head_log_probs[:, :shortlist]]
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        projected = hidden @ jnp.asarray(projection, jnp.float32)
        tail_log_probs = jax.nn.log_softmax(projected @ jnp.asarray(weights, jnp.float32).T, axis=1)
        parts.append(head_log_probs[:, shortlist + index, None] + tail_log_probs)
    return jnp.concatenate(parts, axis=1)


def _tail_losses(hidden: Array, projection: Array, weights: Array, local_targets: Array, in_tail: Array) -> Array:
    """[N] −log p(w | cluster, h) on the rows in the tail, 0 elsewhere."""

    def row_losses(hidden: Array, params: tuple[Array, Array], targets: Array) -> Array:
        projection, weights = params
        return full_softmax_loss(hidden @ projection, weights, None, targets, chunk_size=TAIL_CHUNK)

    targets = jnp.where(in_tail, local_targets, 0)
    return selected_row_losses(row_losses, TAIL_BLOCK_ROWS, hidden, (projection, weights), targets, in_tail)


def _validate(
    hidden: ArrayLike,
    head_weights: ArrayLike,
    tail_projections: Sequence[ArrayLike],
    tail_weights: Sequence[ArrayLike],
    cutoffs: Sequence[int],
    head_biases: ArrayLike | None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
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
    cutoffs = checks.require_cutoffs("cutoffs", values, vocab_size)
    bounds = cutoffs + (vocab_size,)
    checks.require_table("head_weights", head_weights, cutoffs[0] + num_clusters, features)
    checks.require_vector("head_biases", head_biases, cutoffs[0] + num_clusters)
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        checks.require_rank(f"tail_projections[{index}]", projection, 2)
        width = np.shape(projection)[1]
        checks.require_table(f"tail_projections[{index}]", projection, features, width)
        checks.require_table(f"tail_weights[{index}]", weights, bounds[index + 1] - bounds[index], width)
    return cutoffs, bounds
