"""The variational autoencoder language model (Bowman et al. 2016): an LSTM encoder gives a
diagonal Gaussian q(z | x) and a decoder LM is conditioned on its sample z.

The encoder reads a row's tokens and projects its last layer's final h to (μ, log σ²); the
decoder is a stacked recurrence whose initial carries are tanh(W z + b) and, with
`model.rnn_vae.feed_latent`, whose first layer also reads z next to every input embedding. The
decoder's hidden states [B, T, D] go to any output head, so the reconstruction term
log p(x | z) is the head's loss; the objective `seqjax.objectives.VAE` adds β · KL.

Decoding conditions on a latent: `init_decode_state(B, max_len, latent=z [B, Z])` (the
generation glue draws z from the prior N(0, I); `interpolate_latents` walks between two
posterior means).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.checks import integer
from seqjax.config import MODELS, Options, option
from seqjax.models.base import TokenModel, dense_axes, token_embedding
from seqjax.models.input_checks import check_decode_size, check_mask, check_tokens
from seqjax.models.recurrent.cells import CARRY_SIZE, Carry
from seqjax.models.recurrent.layers import Recurrent, step_stack


@dataclasses.dataclass(frozen=True)
class RNNVAEOptions(Options):
    """The VAE LM's latent: its size and where the decoder reads it."""

    latent_size: int = option(32, "dimensions Z of the latent z", check=integer())
    feed_latent: bool = option(
        False, "z is also concatenated to every decoder input (else it only sets the initial carries)"
    )


class RNNVAE(TokenModel):
    """Encoder recurrence → q(z | x) = N(μ, diag σ²); z → decoder recurrence → hidden [B, T, D].

    Encoder and decoder share the token embedding (one table, which a tied head scores
    with). Dropout (train only) acts on the decoder's embeddings, between its layers and on
    its output, as in `RNNLM`; the encoder runs without dropout, so q is the same in
    training and evaluation. The decode state is {"carries": per-layer carries, "latent":
    z [B, Z]}.
    """

    recurrent: ClassVar[bool] = True
    latent: ClassVar[bool] = True  # scored by its evidence lower bound
    objective: ClassVar[str] = "vae"  # the objective that trains the posterior with the decoder
    dtype: Any = jnp.float32

    @property
    def latent_size(self) -> int:
        """Z, the dimensions of z (what a decode from the prior draws)."""
        return self.cfg.options_of(RNNVAEOptions).latent_size

    def setup(self) -> None:
        d, z, cell = self.cfg.d_model, self.cfg.options_of(RNNVAEOptions).latent_size, self.cfg.cell
        self.token_embed = token_embedding(self.vocab_size, d, "embed")
        self.encoder_layers = [Recurrent(cell, d, d, dtype=self.dtype) for _ in range(self.cfg.layers)]
        axes = dense_axes(("embed", "features"))
        self.posterior = nn.Dense(2 * z, dtype=self.dtype, name="posterior", **axes)
        self.latent_to_carries = nn.Dense(self.cfg.layers * CARRY_SIZE[cell] * d, dtype=self.dtype, **axes)
        first = d + z if self.cfg.options_of(RNNVAEOptions).feed_latent else d
        self.decoder_layers = [
            Recurrent(cell, first if index == 0 else d, d, dtype=self.dtype) for index in range(self.cfg.layers)
        ]
        self.dropout = nn.Dropout(self.cfg.dropout)

    def encode(self, tokens: Array, mask: Array | None = None) -> tuple[Array, Array]:
        """The posterior q(z | tokens): tokens [B, T] int32, mask [B, T] bool or None (padded
        steps leave the carry unchanged, so the final h is the last valid token's).

        Returns (mean, log_variance), each [B, Z] float32.
        """
        check_tokens(tokens)
        check_mask(mask, tokens)
        x = self.token_embed(tokens)
        for layer in self.encoder_layers:
            x, carry = layer(x, mask)
        mean, log_variance = jnp.split(self.posterior(carry[-1]).astype(jnp.float32), 2, axis=-1)
        return mean, log_variance

    def _initial_carries(self, latent: Array) -> tuple[Carry, ...]:
        """latent [B, Z] -> per-layer carries, each a tuple of [B, D] float32 = tanh(W z + b)."""
        flat = jnp.tanh(self.latent_to_carries(latent).astype(jnp.float32))
        parts = jnp.split(flat, self.cfg.layers * CARRY_SIZE[self.cfg.cell], axis=-1)
        size = CARRY_SIZE[self.cfg.cell]
        return tuple(tuple(parts[layer * size : (layer + 1) * size]) for layer in range(self.cfg.layers))

    def _check_latent(self, latent: ArrayLike | None, batch_size: int) -> None:
        expected = (batch_size, self.cfg.options_of(RNNVAEOptions).latent_size)
        if latent is None or np.shape(latent) != expected:
            raise ValueError(
                f"latent must be a [B, Z] = {list(expected)} float array (z from the prior N(0, I) or a "
                f"posterior), got {None if latent is None else list(np.shape(latent))}"
            )

    def decode(
        self,
        tokens: Array,
        latent: ArrayLike,
        *,
        mask: Array | None = None,
        embedded: Array | None = None,
        train: bool = False,
    ) -> Array:
        """Teacher-forced decoder given z: tokens [B, T] int32, latent [B, Z] float32, mask
        [B, T] bool or None, embedded [B, T, D] or None (replaces the lookup).

        Returns hidden: [B, T, D] float32.
        """
        x = self.embedded_targets(tokens, mask, embedded)
        self._check_latent(latent, tokens.shape[0])
        return self._decode(x, jnp.asarray(latent, jnp.float32), mask, train)

    def _decode(self, x: Array, latent: Array, mask: Array | None, train: bool) -> Array:
        """The decoder given z: x [B, T, D] float32 its input embeddings, latent [B, Z] float32,
        mask [B, T] bool or None. Returns hidden: [B, T, D] float32."""
        x = self.dropout(x, deterministic=not train)
        if self.cfg.options_of(RNNVAEOptions).feed_latent:
            x = jnp.concatenate([x, jnp.broadcast_to(latent[:, None], (*x.shape[:2], latent.shape[-1]))], axis=-1)
        carries = self._initial_carries(latent)
        for index, layer in enumerate(self.decoder_layers):
            outputs, _ = layer(x, mask, carries[index])
            if index > 0 and self.cfg.residual:
                outputs = outputs + x
            x = self.dropout(outputs, deterministic=not train)
        return x

    def hidden_states(self, tokens: Array, x: Array, mask: Array | None, train: bool) -> Array:
        """The decoder's hidden states [B, T, D] float32 for inputs x [B, T, D] float32 given
        z = the posterior mean of `tokens` [B, T] int32 (a deterministic reconstruction; training
        and evaluation go through the vae objective and `seqjax.objectives.vae.negative_elbo`,
        which sample z)."""
        mean, _ = self.encode(tokens, mask)
        return self._decode(x, mean, mask, train)

    def init_decode_state(self, batch_size: int, max_len: int, latent: ArrayLike | None = None) -> dict[str, Any]:
        """The decoder's carries for z = latent [B, Z] float32 (required: a VAE decodes given
        z). max_len is accepted for the decode contract; a recurrence has no length bound."""
        check_decode_size(batch_size, max_len)
        self._check_latent(latent, batch_size)
        latent = jnp.asarray(latent, jnp.float32)
        return {"carries": self._initial_carries(latent), "latent": latent}

    def decode_step(self, state: dict[str, Any], token: Array) -> tuple[Array, dict[str, Any]]:
        """token: [B] int32 -> (hidden [B, D] float32, next state)."""
        x = self.token_embed(token)
        if self.cfg.options_of(RNNVAEOptions).feed_latent:
            x = jnp.concatenate([x, state["latent"]], axis=-1)
        hidden, carries = step_stack(self.decoder_layers, state["carries"], x, self.cfg.residual)
        return hidden, {"carries": carries, "latent": state["latent"]}


MODELS.register("rnn_vae", RNNVAE, options=RNNVAEOptions, families=("neural", "recurrent"))
