"""Elman, GRU and LSTM cells, each split at its recurrent matmul.

A cell step is `carry' = update(carry, gates_x, h @ W_hh, bias)`: `gates_x` is the input
projection x W_ih + b (computed for all steps at once, outside any scan), `h @ W_hh` is
the one matmul that must run step by step, and `update` is elementwise. Keeping the
matmul outside `update` lets the recurrence's backward pass collect every step's
cotangent of `h @ W_hh` and form dW_hh in one large matmul (see recurrence.py).

Carries are tuples of [B, H] float32 arrays, the output h last:
  lstm  (c, h)  gates [i, f, g, o]  c' = σ(f)·c + σ(i)·tanh(g),  h' = σ(o)·tanh(c')
  gru   (h,)    gates [r, z, n]     n = tanh(x_n + r·(h W_hn + b_hn)),  h' = (1 - z)·n + z·h
  elman (h,)    gates [h]           h' = tanh(x W_ih + b + h W_hh)
The GRU applies its reset gate after the recurrent matmul (the cuDNN / PyTorch form,
b_hn being the cell's own recurrent bias), which is what keeps one fused matmul per step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import DTypeLike

from seqjax.models.matmul.rows_matmul import rows_matmul

Carry = tuple[Array, ...]  # a cell's carry: [B, H] float32 arrays, the output h last
Bias = Array | tuple[()]  # a cell's recurrent bias: [H] float32 for the GRU, () for the others

GATES = {"lstm": 4, "gru": 3, "elman": 1}
CARRY_SIZE = {"lstm": 2, "gru": 1, "elman": 1}


def lstm_update(carry: Carry, gates_x: Array, recurrent: Array, bias: Bias) -> Carry:
    """carry (c, h): [B, H] float32; gates_x, recurrent: [B, 4H] float32; bias unused."""
    del bias
    c, _ = carry
    i, f, g, o = jnp.split(gates_x + recurrent, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return c, jax.nn.sigmoid(o) * jnp.tanh(c)


def gru_update(carry: Carry, gates_x: Array, recurrent: Array, bias: Bias) -> Carry:
    """carry (h,): [B, H] float32; gates_x, recurrent: [B, 3H] float32; bias: [H] (b_hn)."""
    assert not isinstance(bias, tuple), "the GRU has its own recurrent bias b_hn"
    (h,) = carry
    x_r, x_z, x_n = jnp.split(gates_x, 3, axis=-1)
    h_r, h_z, h_n = jnp.split(recurrent, 3, axis=-1)
    r = jax.nn.sigmoid(x_r + h_r)
    z = jax.nn.sigmoid(x_z + h_z)
    n = jnp.tanh(x_n + r * (h_n + bias))
    return ((1.0 - z) * n + z * h,)


def elman_update(carry: Carry, gates_x: Array, recurrent: Array, bias: Bias) -> Carry:
    """carry (h,): [B, H] float32; gates_x, recurrent: [B, H] float32; bias unused."""
    del carry, bias
    return (jnp.tanh(gates_x + recurrent),)


UPDATES = {"lstm": lstm_update, "gru": gru_update, "elman": elman_update}


def matmul(x: Array, kernel: Array, dtype: DTypeLike) -> Array:
    """x [N, D] @ kernel [D, F] with operands in `dtype`, accumulated and returned in float32;
    under autodiff the kernel's gradient reads a row-major xᵀ (`rows_matmul`)."""
    return rows_matmul(x.astype(dtype), kernel.astype(dtype), jnp.float32)


def zero_carry(cell: str, batch_size: int, features: int) -> Carry:
    return tuple(jnp.zeros((batch_size, features), jnp.float32) for _ in range(CARRY_SIZE[cell]))


def cell_step(cell: str, carry: Carry, gates_x: Array, kernel: Array, bias: Bias, dtype: DTypeLike) -> Carry:
    """One step: carry [B, H] tuple, gates_x [B, G*H] float32 -> next carry."""
    return UPDATES[cell](carry, gates_x, matmul(carry[-1], kernel, dtype), bias)
