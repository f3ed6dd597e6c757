"""The bidirectional language model of ELMo (Peters et al. 2018): a forward and a backward
recurrent LM over one token embedding, whose hidden states go to one shared output head.

The forward direction is an ordinary LM (its `__call__` and decode step are `RNNLM`'s, so
generation and the usual evaluation use it); `backward(tokens)` runs the backward stack
from the last step to the first, so its state at t has read tokens[t:] and nothing before t.
The objective `seqjax.objectives.BidirectionalLM` feeds it a row's targets, so that position t
predicts the input at t (the token before them) from the targets after it: the forward LM's
mirror image, each direction reading one real token at the row's edge it starts from.
`features(tokens)` concatenates the two directions' top states at each token: ELMo's
contextual representation.
"""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.config import MODELS
from seqjax.models.base import TokenModel, token_embedding
from seqjax.models.input_checks import check_decode_size, check_mask, check_tokens
from seqjax.models.recurrent.cells import Carry
from seqjax.models.recurrent.layers import Recurrent, run_stack, step_stack


class BiLM(TokenModel):
    """Embedding → a forward and a backward stack of recurrent layers, D wide each.

    Dropout (train only) acts on the embeddings, between layers and on the output of each
    direction, and `cfg.residual` adds a layer's input to its output after the first layer,
    as in `RNNLM`. The decode state is the forward direction's tuple of layer carries.
    """

    recurrent: ClassVar[bool] = True
    objective: ClassVar[str] = "bidirectional_lm"  # the objective that trains both directions
    dtype: Any = jnp.float32

    def setup(self) -> None:
        d, cell = self.cfg.d_model, self.cfg.cell
        self.token_embed = token_embedding(self.vocab_size, d, "embed")
        self.forward_layers = [Recurrent(cell, d, d, dtype=self.dtype) for _ in range(self.cfg.layers)]
        self.backward_layers = [Recurrent(cell, d, d, reverse=True, dtype=self.dtype) for _ in range(self.cfg.layers)]
        self.dropout = nn.Dropout(self.cfg.dropout)

    def hidden_states(self, tokens: Array, x: Array, mask: Array | None, train: bool) -> Array:
        """The forward LM (`__call__`): tokens [B, T] int32, x [B, T, D] float32 their lookup,
        mask [B, T] bool or None. Returns hidden [B, T, D] float32, row t having read tokens[: t + 1]."""
        if self.is_initializing():  # one init creates both directions' parameters
            self.backward(tokens, mask=mask)
        return run_stack(self.forward_layers, x, mask, self.dropout, self.cfg.residual, train)

    def backward(self, tokens: Array, *, mask: Array | None = None, train: bool = False) -> Array:
        """The backward LM: tokens [B, T] int32, mask [B, T] bool or None (padded steps, at a
        row's end, leave the carry at its start). Returns hidden [B, T, D] float32, row t
        having read tokens[t:]."""
        x = self.embedded_targets(tokens, mask, None)
        return run_stack(self.backward_layers, x, mask, self.dropout, self.cfg.residual, train)

    def features(self, tokens: Array, mask: Array | None = None) -> Array:
        """ELMo's contextual features: [B, T, 2D] float32, at t the forward state after tokens[: t + 1]
        and the backward state after tokens[t:] (no dropout)."""
        check_tokens(tokens)
        check_mask(mask, tokens)
        return jnp.concatenate([self(tokens, mask=mask), self.backward(tokens, mask=mask)], axis=-1)

    def init_decode_state(self, batch_size: int, max_len: int) -> tuple[Carry, ...]:
        """The forward direction's per-layer carries, each a tuple of [B, D] float32 zeros."""
        check_decode_size(batch_size, max_len)
        return tuple(layer.initial_carry(batch_size) for layer in self.forward_layers)

    def decode_step(self, state: tuple[Carry, ...], token: Array) -> tuple[Array, tuple[Carry, ...]]:
        """token: [B] int32 -> (hidden [B, D] float32 of the forward direction, next state)."""
        return step_stack(self.forward_layers, state, self.token_embed(token), self.cfg.residual)


MODELS.register("bilm", BiLM, families=("neural", "recurrent"))
