"""Fixed-window neural language model (Bengio et al. 2003).

Row t sees the embeddings of the `cfg.context` most recent tokens x_{t-k+1..t},
concatenated into e_t ([k*D]); hidden_t = tanh(e_t H + d), plus e_t W with
`cfg.nnlm.direct`. Bengio's direct connections run from the context straight to the
logits; here the output head's weights U follow the hidden, so U(tanh(eH + d) + eW)
carries them as a rank-D factorization U·W. Positions before the start of the sequence
(and padded tokens) contribute zero vectors.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.config import MODELS, Options, option
from seqjax.models.base import TokenModel, dense_axes, token_embedding
from seqjax.models.input_checks import check_decode_size


@dataclasses.dataclass(frozen=True)
class NNLMOptions(Options):
    """Bengio's feed-forward LM's direct connections."""

    direct: bool = option(False, "direct (linear) connections from the context to the output")


class NNLM(TokenModel):
    """tokens [B, T] → hidden [B, T, D]. Decode state: the last k tokens and their validity."""

    dtype: Any = jnp.float32

    def setup(self) -> None:
        d = self.cfg.d_model
        self.token_embed = token_embedding(self.vocab_size, d, "embed")
        self.hidden = nn.Dense(d, dtype=self.dtype, **dense_axes(("embed", "features")))
        if self.cfg.options_of(NNLMOptions).direct:
            self.direct = nn.Dense(d, use_bias=False, dtype=self.dtype, **dense_axes(("embed", "features")))
        self.dropout = nn.Dropout(self.cfg.dropout)

    def _hidden(self, windows: Array, train: bool) -> Array:
        """windows: [..., k*D] float32 -> [..., D] float32."""
        windows = self.dropout(windows, deterministic=not train)
        hidden = jnp.tanh(self.hidden(windows).astype(jnp.float32))
        if self.cfg.options_of(NNLMOptions).direct:
            hidden = hidden + self.direct(windows).astype(jnp.float32)
        result: Array = self.dropout(hidden, deterministic=not train)
        return result

    def hidden_states(self, tokens: Array, x: Array, mask: Array | None, train: bool) -> Array:
        """x: [B, T, D] float32; mask: [B, T] bool or None. Returns hidden: [B, T, D] float32."""
        if mask is not None:
            x = jnp.where(mask[..., None], x, 0.0)
        length = x.shape[1]
        # Window slot j holds x_{t-j}: the sequence shifted right by j, zeros shifted in.
        padded = jnp.pad(x, ((0, 0), (self.cfg.context - 1, 0), (0, 0)))
        slots = [
            padded[:, self.cfg.context - 1 - j : self.cfg.context - 1 - j + length] for j in range(self.cfg.context)
        ]
        return self._hidden(jnp.concatenate(slots, axis=-1), train)

    def init_decode_state(self, batch_size: int, max_len: int) -> dict[str, Array]:
        """{"tokens": [B, k] int32, "valid": [B, k] bool}, newest token in the first column.

        max_len is accepted for the decode contract; the window has a fixed size.
        """
        check_decode_size(batch_size, max_len)
        shape = (batch_size, self.cfg.context)
        return {"tokens": jnp.zeros(shape, jnp.int32), "valid": jnp.zeros(shape, bool)}

    def decode_step(self, state: dict[str, Array], token: Array) -> tuple[Array, dict[str, Array]]:
        """token: [B] int32 -> (hidden [B, D] float32, next state)."""
        tokens = jnp.concatenate([token[:, None], state["tokens"][:, :-1]], axis=1)
        valid = jnp.concatenate([jnp.ones_like(state["valid"][:, :1]), state["valid"][:, :-1]], axis=1)
        x = jnp.where(valid[..., None], self.token_embed(tokens), 0.0)
        hidden = self._hidden(x.reshape(x.shape[0], -1), False)
        return hidden, {"tokens": tokens, "valid": valid}


MODELS.register("nnlm", NNLM, options=NNLMOptions, families=("neural", "context"))
