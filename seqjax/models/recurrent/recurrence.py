"""A recurrent cell over time as one `lax.scan`, with a backward pass shaped like cuDNN's.

Autodiff of a scan that closes over W_hh accumulates dW_hh += h_tᵀ·d(h_t W_hh) inside the
backward loop: a rank-B update of a [H, G*H] accumulator at every step, which dominates
the backward time on CPU. The custom VJP below keeps only dh_{t-1} = d(h W_hh)·W_hhᵀ in
the loop, stacks the per-step cotangents of h W_hh, and forms dW_hh afterwards as one
[H, T*B] x [T*B, G*H] matmul.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array, lax
from jax.typing import DTypeLike

from seqjax.models.matmul.rows_matmul import row_major_transpose
from seqjax.models.recurrent.cells import UPDATES, Bias, Carry, matmul
from seqjax.placement import gathered


class RecurrenceInputs(NamedTuple):
    """The arrays a recurrence runs over: what `recurrence` differentiates (valid apart).

    gates_x: [T, B, G*H] float32, the input projections x_t W_ih + b.
    valid: [T, B] bool (a False step leaves the carry unchanged) or None (all valid).
    carry: initial carry, a tuple of [B, H] float32.
    kernel: [H, G*H] float32, W_hh.
    bias: the cell's recurrent bias ([H] for the GRU) or an empty tuple.
    """

    gates_x: Array
    valid: Array | None
    carry: Carry
    kernel: Array
    bias: Bias


# gates_x [T, B, G*H], valid [T, B] or None, the carries before each step (each [T, B, H]),
# h W_hh per step [T, B, G*H], the kernel W_hh [H, G*H] and the cell's recurrent bias.
Residuals = tuple[Array, Array | None, Carry, Array, Array, Bias]


def _masked_update(cell: str, carry: Carry, gates_x: Array, recurrent: Array, bias: Bias, valid: Array | None) -> Carry:
    new = UPDATES[cell](carry, gates_x, recurrent, bias)
    if valid is None:
        return new
    return tuple(jnp.where(valid[:, None], n, o) for n, o in zip(new, carry))


def _forward(
    cell: str, dtype: DTypeLike, reverse: bool, sequence: RecurrenceInputs
) -> tuple[Array, Carry, tuple[Carry, Array]]:
    """Returns (outputs [T, B, H], final carry, (carries before each step, h W_hh per step))."""
    gates_x, valid, carry, kernel, bias = sequence
    kernel = gathered(kernel)  # once, not at every step

    def body(carry: Carry, inputs: tuple[Array, Array | None]) -> tuple[Carry, tuple[Array, Carry, Array]]:
        gates_t, valid_t = inputs
        recurrent = matmul(carry[-1], kernel, dtype)
        new = _masked_update(cell, carry, gates_t, recurrent, bias, valid_t)
        return new, (new[-1], carry, recurrent)

    carry, (outputs, previous, recurrent) = lax.scan(body, carry, (gates_x, valid), reverse=reverse)
    return outputs, carry, (previous, recurrent)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def recurrence(cell: str, dtype: DTypeLike, reverse: bool, sequence: RecurrenceInputs) -> tuple[Array, Carry]:
    """Runs `cell` over time.

    Args:
      cell: "lstm" | "gru" | "elman".
      dtype: matmul operand dtype (accumulation is float32).
      reverse: scan from the last step to the first.
      sequence: the input projections, validity, initial carry and recurrent weights.
    Returns:
      outputs [T, B, H] float32 (the carried h after each step), final carry.
    """
    outputs, carry, _ = _forward(cell, dtype, reverse, sequence)
    return outputs, carry


def _recurrence_fwd(
    cell: str, dtype: DTypeLike, reverse: bool, sequence: RecurrenceInputs
) -> tuple[tuple[Array, Carry], Residuals]:
    outputs, final, (previous, recurrent) = _forward(cell, dtype, reverse, sequence)
    return (outputs, final), (sequence.gates_x, sequence.valid, previous, recurrent, sequence.kernel, sequence.bias)


def _recurrence_bwd(
    cell: str, dtype: DTypeLike, reverse: bool, residuals: Residuals, cotangents: tuple[Array, Carry]
) -> tuple[RecurrenceInputs]:
    gates_x, valid, previous, recurrent, kernel, bias = residuals
    d_outputs, d_final = cotangents
    kernel = gathered(kernel)

    def body(
        state: tuple[Carry, Bias], inputs: tuple[Array, Array | None, Carry, Array, Array]
    ) -> tuple[tuple[Carry, Bias], tuple[Array, Array]]:
        d_carry, d_bias = state
        gates_t, valid_t, previous_t, recurrent_t, d_output_t = inputs
        d_carry = (*d_carry[:-1], d_carry[-1] + d_output_t)
        _, pullback = jax.vjp(
            lambda c, g, r, b: _masked_update(cell, c, g, r, b, valid_t),
            previous_t,
            gates_t,
            recurrent_t,
            bias,
        )
        d_previous, d_gates_t, d_recurrent_t, d_bias_t = pullback(d_carry)
        d_h = matmul(d_recurrent_t, kernel.T, dtype)
        d_previous = (*d_previous[:-1], d_previous[-1] + d_h)
        d_bias = jax.tree.map(jnp.add, d_bias, d_bias_t)
        return (d_previous, d_bias), (d_gates_t, d_recurrent_t)

    zero_bias = jax.tree.map(jnp.zeros_like, bias)
    (d_carry, d_bias), (d_gates_x, d_recurrent) = lax.scan(
        body,
        (d_final, zero_bias),
        (gates_x, valid, previous, recurrent, d_outputs),
        reverse=not reverse,
    )
    time, batch, features = previous[-1].shape
    d_kernel = matmul(
        row_major_transpose(previous[-1].reshape(time * batch, features)),
        d_recurrent.reshape(time * batch, -1),
        dtype,
    )
    return (RecurrenceInputs(d_gates_x, None, d_carry, d_kernel, d_bias),)


recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)
