"""The rows of one tail cluster of the adaptive softmax (`seqjax.heads.adaptive`), under static shapes.

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

import math
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.checks import check_int
from seqjax.heads import checks
from seqjax.heads.full import full_softmax_loss
from seqjax.heads.selected_rows import capacity_bucket, selected_row_losses
from seqjax.placement import gathered

TAIL_BLOCK_ROWS = 128  # rows per tail block (measured best of 64/128/256/512 at V = 100k: less padding per tail)
TAIL_CHUNK = 4096  # words per block of a tail's softmax (measured best of 1k/4k/16k at d = 32, 128)


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
    rows = check_int("rows", rows)
    capacities = []
    for share in tail_shares:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"tail_shares must be in [0, 1], got {tuple(tail_shares)}")
        mean = rows * share
        bound = mean + margin * math.sqrt(mean * (1.0 - share)) + 1.0
        capacities.append(min(-(-math.ceil(bound) // 8) * 8, rows))
    return tuple(capacities)


def require_capacities(capacities: Sequence[int], targets: ArrayLike, cutoffs: Sequence[int]) -> None:
    if len(capacities) != len(cutoffs):
        raise ValueError(f"tail_capacities must have one int per tail cluster ({len(cutoffs)}), got {capacities!r}")
    for capacity in capacities:
        check_int("tail_capacities entry", capacity)
    if checks.is_concrete(targets):
        cluster = np.searchsorted(np.asarray(cutoffs), np.asarray(targets), side="right")
        for index, capacity in enumerate(capacities):
            rows = int((cluster == index + 1).sum())
            if rows > capacity:
                raise ValueError(
                    f"tail_capacities[{index}] must hold the {rows} targets in tail cluster {index + 1}, got {capacity}"
                )


def gathered_tail_losses(
    hidden: Array, projection: Array, weights: Array, local_targets: Array, in_tail: Array, capacity: int
) -> Array:
    """[N] −log p(w | cluster, h) on the rows in the tail (gathered into `capacity` slots), 0 elsewhere."""
    (rows,) = jnp.nonzero(in_tail, size=capacity, fill_value=0)
    valid = jnp.arange(capacity) < in_tail.sum()
    targets = jnp.where(valid, local_targets[rows], 0)
    losses = full_softmax_loss(hidden[rows] @ projection, weights, None, targets, chunk_size=TAIL_CHUNK)
    return jnp.zeros(in_tail.shape, jnp.float32).at[rows].add(jnp.where(valid, losses, 0.0))


def blocked_tail_losses(
    hidden: Array, projection: Array, weights: Array, local_targets: Array, in_tail: Array
) -> Array:
    """[N] −log p(w | cluster, h) on the rows in the tail, 0 elsewhere."""

    def row_losses(hidden: Array, params: tuple[Array, Array], targets: Array) -> Array:
        projection, weights = params
        return full_softmax_loss(hidden @ projection, weights, None, targets, chunk_size=TAIL_CHUNK)

    targets = jnp.where(in_tail, local_targets, 0)
    # Whole on every device before the walk: gathered where each block reads it, the tail was
    # gathered again at every block (0.19 GiB a block for an 800k-word LSTM's first tail on 8 x H100).
    params = (gathered(projection), gathered(weights))
    return selected_row_losses(row_losses, TAIL_BLOCK_ROWS, hidden, params, targets, in_tail)
