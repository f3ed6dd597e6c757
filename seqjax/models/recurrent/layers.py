"""Recurrent layers (Elman, GRU, LSTM; uni- or bidirectional), their stacks and the RNN encoder.

Each layer computes the input projection of every time step in one `[B*T, D] x [D, G*H]`
matmul before the scan, so the sequential loop holds only the recurrent `h @ W_hh` and
the elementwise gates (cells.py); its backward pass is the hand-written one in
recurrence.py. The rows stay batch-major through that matmul and only its result turns
time-major: merged time-major, the rows a mesh splits by batch are interleaved, and under FSDP
the TPU compiler all-reduced the whole batch's [T*B, G*H] product (2 GiB per step for an
800k-word LSTM LM on a v5p 4x4x4; benchmarks/results/targets.md). Matmul operands are cast to
the computation dtype; gates and carries stay float32 so a bfloat16 run does not accumulate
rounding through time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.config import ModelConfig
from seqjax.models.recurrent.cells import GATES, Bias, Carry, cell_step, matmul, zero_carry
from seqjax.models.recurrent.recurrence import RecurrenceInputs, recurrence
from seqjax.placement import logical_param


class Recurrent(nn.Module):
    """One recurrent layer: `cell` over time, input projection hoisted out of the scan.

    The carry is a tuple of [B, H] float32 arrays ((c, h) for the LSTM, (h,) otherwise);
    its last element is the layer's output.
    """

    cell: str
    in_features: int
    features: int
    reverse: bool = False
    dtype: Any = jnp.float32

    def setup(self) -> None:
        gates = GATES[self.cell] * self.features
        kernel = ("embed", "gates")  # [in, G·H]; the hidden width H is the model's D
        self.input_kernel = logical_param(
            self, "input_kernel", nn.initializers.lecun_normal(), kernel, (self.in_features, gates)
        )
        self.input_bias = logical_param(self, "input_bias", self._bias_init, ("gates",), (gates,))
        self.recurrent_kernel = logical_param(
            self, "recurrent_kernel", nn.initializers.orthogonal(), kernel, (self.features, gates)
        )
        if self.cell == "gru":
            self.recurrent_bias = logical_param(
                self, "recurrent_bias", nn.initializers.zeros, ("embed",), (self.features,)
            )

    def _bias_init(self, key: Array, shape: tuple[int, ...], dtype: Any) -> Array:
        del key
        bias = jnp.zeros(shape, dtype)
        if self.cell == "lstm":
            # Forget gate starts open (Jozefowicz et al. 2015) so early gradients flow through c.
            bias = bias.at[self.features : 2 * self.features].set(1.0)
        return bias

    def initial_carry(self, batch_size: int) -> Carry:
        return zero_carry(self.cell, batch_size, self.features)

    def _bias(self) -> Bias:
        return self.recurrent_bias if self.cell == "gru" else ()

    def __call__(self, inputs: Array, mask: Array | None = None, carry: Carry | None = None) -> tuple[Array, Carry]:
        """Runs the layer over a sequence.

        Args:
          inputs: [B, T, D_in] float.
          mask: [B, T] bool, True at valid steps; a False step leaves the carry unchanged
            (so trailing padding never changes what valid steps compute). None: all valid.
          carry: initial carry, zeros if None.
        Returns:
          outputs [B, T, H] float32 (the carried h, unchanged at padded steps), final carry.
        """
        batch, time, _ = inputs.shape
        if carry is None:
            carry = self.initial_carry(batch)
        gates_x = matmul(inputs.reshape(batch * time, self.in_features), self.input_kernel, self.dtype)
        gates_x = jnp.swapaxes((gates_x + self.input_bias).reshape(batch, time, -1), 0, 1)
        valid = None if mask is None else jnp.swapaxes(mask, 0, 1)
        sequence = RecurrenceInputs(gates_x, valid, carry, self.recurrent_kernel, self._bias())
        outputs, carry = recurrence(self.cell, self.dtype, self.reverse, sequence)
        return jnp.swapaxes(outputs, 0, 1), carry

    def step(self, carry: Carry, inputs: Array) -> tuple[Carry, Array]:
        """One time step. inputs: [B, D_in] float; returns (carry, h [B, H] float32)."""
        gates_x = matmul(inputs, self.input_kernel, self.dtype) + self.input_bias
        carry = cell_step(self.cell, carry, gates_x, self.recurrent_kernel, self._bias(), self.dtype)
        return carry, carry[-1]


def run_stack(
    layers: Sequence[Recurrent],
    x: Array,
    mask: Array | None,
    dropout: nn.Dropout,
    residual: bool,
    train: bool,
    carries: Sequence[Carry] | None = None,
) -> Array:
    """Stacked recurrent layers over x [B, T, D] (mask [B, T] bool or None) -> [B, T, D] float32:
    dropout (train only) on the input, between layers and on the output; with `residual`, layers
    after the first add their input to their output. `carries`: each layer's initial carry
    (None: zeros)."""
    x = dropout(x, deterministic=not train)
    for index, layer in enumerate(layers):
        outputs, _ = layer(x, mask, None if carries is None else carries[index])
        if index > 0 and residual:
            outputs = outputs + x
        x = dropout(outputs, deterministic=not train)
    return x


def step_stack(
    layers: Sequence[Recurrent], state: tuple[Carry, ...], x: Array, residual: bool
) -> tuple[Array, tuple[Carry, ...]]:
    """One decode step of `run_stack`'s layers: x [B, D] float32, state the per-layer carries
    -> (the top layer's h [B, D] float32, next state)."""
    carries = []
    for index, layer in enumerate(layers):
        carry, outputs = layer.step(state[index], x)
        carries.append(carry)
        x = outputs + x if index > 0 and residual else outputs
    return x, tuple(carries)


class RNNEncoder(nn.Module):
    """Stacked (optionally bidirectional) recurrent encoder over source embeddings.

    With `cfg.bidirectional` each layer runs a forward and a backward recurrence of width
    D/2 and concatenates them, so outputs and final carries are D wide either way and can
    initialize a D-wide decoder. Padded source steps (src_mask False) leave both carries
    unchanged: the forward final carry is the one at the last valid token, and the
    backward recurrence starts at it.
    """

    cfg: ModelConfig
    dtype: Any = jnp.float32

    def setup(self) -> None:
        d = self.cfg.d_model
        width = d // 2 if self.cfg.bidirectional else d
        self.forward_layers = [Recurrent(self.cfg.cell, d, width, dtype=self.dtype) for _ in range(self.cfg.layers)]
        if self.cfg.bidirectional:
            self.backward_layers = [
                Recurrent(self.cfg.cell, d, width, reverse=True, dtype=self.dtype) for _ in range(self.cfg.layers)
            ]
        self.dropout = nn.Dropout(self.cfg.dropout)

    def __call__(self, x: Array, mask: Array | None = None, train: bool = False) -> tuple[Array, tuple[Carry, ...]]:
        """x: [B, S, D] float32; mask: [B, S] bool or None.

        Returns outputs [B, S, D] float32 and the per-layer final carries ([B, D] tuples).
        """
        finals = []
        for index in range(self.cfg.layers):
            outputs, carry = self.forward_layers[index](x, mask)
            if self.cfg.bidirectional:
                backward, backward_carry = self.backward_layers[index](x, mask)
                outputs = jnp.concatenate([outputs, backward], axis=-1)
                carry = tuple(jnp.concatenate(pair, axis=-1) for pair in zip(carry, backward_carry))
            if index > 0 and self.cfg.residual:
                outputs = outputs + x
            x = self.dropout(outputs, deterministic=not train)
            finals.append(carry)
        return x, tuple(finals)
