"""The stacked RNN language model: embedding, recurrent layers (`recurrent.layers`), hidden states."""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.config import MODELS, ModelConfig
from seqjax.models.base import TokenModel, token_embedding
from seqjax.models.input_checks import check_decode_size
from seqjax.models.recurrent.cells import GATES, Carry
from seqjax.models.recurrent.layers import Recurrent, run_stack, step_stack


class RNNLM(TokenModel):
    """Embedding → stacked recurrent layers → hidden [B, T, D] (row t predicts token t+1).

    Dropout (train only) acts on the embeddings, between layers and on the output — the
    non-recurrent connections (Zaremba et al. 2014). With `cfg.residual`, layers after the
    first add their input to their output. The decode state is the tuple of layer carries.
    """

    recurrent: ClassVar[bool] = True
    dtype: Any = jnp.float32

    @classmethod
    def matmul_weights(cls, cfg: ModelConfig) -> int | None:
        """Each layer's input and recurrent kernels, [D, G·D] each for a cell of G gates."""
        return cfg.layers * GATES[cfg.cell] * 2 * cfg.d_model**2

    def setup(self) -> None:
        d = self.cfg.d_model
        self.token_embed = token_embedding(self.vocab_size, d, "embed")
        self.rnn_layers = [Recurrent(self.cfg.cell, d, d, dtype=self.dtype) for _ in range(self.cfg.layers)]
        self.dropout = nn.Dropout(self.cfg.dropout)

    def hidden_states(self, tokens: Array, x: Array, mask: Array | None, train: bool) -> Array:
        """x: [B, T, D] float32; mask: [B, T] bool or None. Returns hidden: [B, T, D] float32."""
        return run_stack(self.rnn_layers, x, mask, self.dropout, self.cfg.residual, train)

    def init_decode_state(self, batch_size: int, max_len: int) -> tuple[Carry, ...]:
        """Returns the per-layer carries, each a tuple of [B, D] float32 zeros.

        max_len is accepted for the decode contract; a recurrence has no length bound.
        """
        check_decode_size(batch_size, max_len)
        return tuple(layer.initial_carry(batch_size) for layer in self.rnn_layers)

    def decode_step(self, state: tuple[Carry, ...], token: Array) -> tuple[Array, tuple[Carry, ...]]:
        """token: [B] int32 -> (hidden [B, D] float32, next state)."""
        return step_stack(self.rnn_layers, state, self.token_embed(token), self.cfg.residual)


MODELS.register("rnn", RNNLM, families=("neural", "recurrent"))
