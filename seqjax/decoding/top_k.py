"""The k largest entries of each row of a vocabulary-wide array, as `jax.lax.top_k` ranks them.

`lax.top_k` on XLA's CPU runtime ranks each row in one pass of a single thread: 2.1 ms for
the 128 rows × 10,000 tokens of a beam-4 decoding step (32 batch rows), 5% of that step.
Ranking blocks instead — the maximum of each block of C tokens (a vectorized reduction), the
k best blocks, then the k best of those k·C tokens — took 0.4 ms on the same 2-core AMD EPYC.

It is exact, ties included. Order entries by value, then by lower index (`lax.top_k`'s
order), and a block by its best entry. Each of the k best entries lies in one of the k best
blocks: a block outside them has k blocks ahead of it, so k entries ahead of each of its
own. Blocks are contiguous, so ranking their maxima by value with ties to the lower block
ranks their best entries in that order; and the chosen blocks, put back in index order, keep
their entries in index order for the last ranking.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

# Below these the one-pass ranking is as fast.
MIN_LENGTH = 2048
MAX_K = 16


def block_size(length: int) -> int:
    """Tokens per block: the largest divisor of `length` in [32, 100], so that no padding is
    copied, else 100 (a padded last block)."""
    return next((size for size in range(100, 31, -1) if length % size == 0), 100)


def top_k(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """`lax.top_k(x, k)`: values and indices of the k largest entries of each row.

    Args:
      x: [N, V] float.
      k: static int in [1, V].
    Returns:
      ([N, k] values in x's dtype, [N, k] int32 indices), best first; equal values in order
      of index, exactly as `lax.top_k` returns them.
    """
    rows, length = x.shape
    if length < MIN_LENGTH or k > MAX_K:
        return lax.top_k(x, k)
    size = block_size(length)
    count = -(-length // size)
    padded = jnp.pad(x, ((0, 0), (0, count * size - length)), constant_values=-jnp.inf)
    blocks = padded.reshape(rows, count, size)
    _, best_blocks = lax.top_k(blocks.max(axis=-1), k)
    best_blocks = jnp.sort(best_blocks, axis=-1)
    candidates = jnp.take_along_axis(blocks, best_blocks[:, :, None], axis=1).reshape(rows, k * size)
    values, positions = lax.top_k(candidates, k)
    block = jnp.take_along_axis(best_blocks, positions // size, axis=1)
    return values, (block * size + positions % size).astype(jnp.int32)
