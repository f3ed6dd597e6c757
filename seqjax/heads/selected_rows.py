"""Per-row losses of a data-dependent subset of rows, at the cost of that subset, under jit.

Adaptive softmax scores a tail cluster only for the rows whose target lies in it; the class
softmax scores a large class only for the rows whose target lies in it. The subset's size
is data-dependent but shapes must be static, so `selected_row_losses` sorts the selected rows
to the front and walks them in blocks of a fixed number of rows with a `lax.fori_loop` whose
trip count is the number of blocks the subset fills. Time follows the selected rows (at most
one block of waste) and memory is one block's, whatever the batch holds.

A loop with a data-dependent trip count has no reverse-mode derivative in JAX, so the custom
VJP runs a second loop over the same blocks that accumulates their VJPs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
from jax import Array, lax

# (hidden [R, D], params, row_data with leading axis R) -> [R] float32 losses; params and
# row_data are pytrees.
RowLosses = Callable[[Array, Any, Any], Array]
Carry = TypeVar("Carry")
# (carry, picked [R] int rows, valid [R] bool, row_data at those rows) -> carry: one block's share.
AddBlock = Callable[[Carry, Array, Array, Any], Carry]


def capacity_bucket(count: int) -> int:
    """A static capacity for `count` data-dependent items (host): count (at least 1) rounded up
    to m · 2^e, m in 4..8, e = max(bit_length(count) - 3, 0): less than count/4 of padding, and
    four capacities per doubling of the count to compile for.

    Example:
      >>> from seqjax.heads.selected_rows import capacity_bucket
      >>> [capacity_bucket(n) for n in (0, 8, 9, 100, 1025)]
      [1, 8, 10, 112, 1280]
    """
    count = max(int(count), 1)
    exponent = max(count.bit_length() - 3, 0)
    return int(-(-count // 2**exponent) * 2**exponent)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def selected_row_losses(
    row_losses: RowLosses, block_rows: int, hidden: Array, params: Any, row_data: Any, selected: Array
) -> Array:
    """[N] float32: row_losses on the rows where `selected`, 0 on the others.

    Args:
      row_losses: (hidden [R, D], params, row_data with leading axis R) -> [R] float32 losses,
        R = block_rows; differentiable in hidden and params, and finite for every row of
        `row_data` (blocks are padded with unselected rows, whose losses are dropped).
      block_rows: rows per block (static; capped at N).
      hidden: [N, D] float32; params: a pytree of float arrays (not per row).
      row_data: a pytree of per-row arrays [N, ...] (ids, offsets), not differentiated.
      selected: [N] bool.
    """
    return _losses(row_losses, block_rows, hidden, params, row_data, selected)


def _forward(
    row_losses: RowLosses, block_rows: int, hidden: Array, params: Any, row_data: Any, selected: Array
) -> tuple[Array, tuple[Array, Any, Any, Array]]:
    losses = _losses(row_losses, block_rows, hidden, params, row_data, selected)
    return losses, (hidden, params, row_data, selected)


def _backward(
    row_losses: RowLosses, block_rows: int, residuals: tuple[Array, Any, Any, Array], loss_grads: Array
) -> tuple[Array, Any, None, None]:
    hidden, params, row_data, selected = residuals

    def add_block(grads: tuple[Array, Any], picked: Array, valid: Array, data: Any) -> tuple[Array, Any]:
        _, vjp = jax.vjp(lambda h, p: row_losses(h, p, data), hidden[picked], params)
        hidden_grad, params_grad = vjp(jnp.where(valid, loss_grads[picked], 0.0))
        return grads[0].at[picked].add(hidden_grad), jax.tree.map(jnp.add, grads[1], params_grad)

    zeros = (jnp.zeros_like(hidden), jax.tree.map(jnp.zeros_like, params))
    hidden_grad, params_grad = _walk(block_rows, row_data, selected, add_block, zeros)
    return hidden_grad, params_grad, None, None


selected_row_losses.defvjp(_forward, _backward)


def _losses(
    row_losses: RowLosses, block_rows: int, hidden: Array, params: Any, row_data: Any, selected: Array
) -> Array:
    """[N] float32: the selected rows' losses, walked in blocks; 0 on the others."""

    def add_block(losses: Array, picked: Array, valid: Array, data: Any) -> Array:
        per_row = row_losses(hidden[picked], params, data)
        return losses.at[picked].add(jnp.where(valid, per_row, 0.0))

    return _walk(block_rows, row_data, selected, add_block, jnp.zeros((selected.shape[0],), jnp.float32))


def _walk(block_rows: int, row_data: Any, selected: Array, add_block: AddBlock[Carry], init: Carry) -> Carry:
    """`init` updated by `add_block` for each block of R = min(block_rows, N) selected rows, in
    order; a block's rows past the selected ones are padding (valid false)."""
    rows = selected.shape[0]
    block = max(1, min(block_rows, rows))
    count = selected.sum()
    order = jnp.argsort(jnp.logical_not(selected), stable=True)  # selected rows first, in order
    # Padded to whole blocks, so that no block's dynamic slice is shifted back to fit.
    order = jnp.concatenate([order, jnp.zeros((-rows % block,), order.dtype)])

    def visit(index: Array, carry: Carry) -> Carry:
        positions = index * block + jnp.arange(block)
        picked = lax.dynamic_slice_in_dim(order, index * block, block)
        return add_block(carry, picked, positions < count, jax.tree.map(lambda leaf: leaf[picked], row_data))

    result: Carry = lax.fori_loop(0, (count + block - 1) // block, visit, init)
    return result
