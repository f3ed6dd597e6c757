"""Token embeddings and position encodings shared by the models."""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.config import ModelConfig
from seqjax.models.checks import check_embedded, check_mask, check_tokens


def sinusoidal_positions(positions: Array, width: int) -> Array:
    """Vaswani et al.'s encoding: sin on the first half of the features, cos on the second.

    Args:
      positions: [...] int32.
    Returns:
      [..., width] float32.
    """
    frequencies = 10000.0 ** (-jnp.arange(width // 2, dtype=jnp.float32) / (width // 2))
    angles = positions[..., None].astype(jnp.float32) * frequencies
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def token_embedding(vocab_size: int, width: int, name: str) -> nn.Embed:
    """[V, D] table with N(0, 1/D) entries: rows of about unit norm, so an output head tied
    to it starts with O(1) logits; the Transformer rescales lookups by √D."""
    return nn.Embed(vocab_size, width, embedding_init=nn.initializers.normal(width**-0.5), name=name)


class TokenModel(nn.Module):
    """What every neural model shares (`seqjax.contracts.Model`): its config, its target
    vocabulary, and the target embedding table, which a subclass creates in `setup` as
    `self.token_embed = token_embedding(vocab_size, D, "embed")`."""

    cfg: ModelConfig
    vocab_size: int
    has_encoder: ClassVar[bool] = False
    recurrent: ClassVar[bool] = False

    @classmethod
    def matmul_weights(cls, cfg: ModelConfig) -> int | None:
        """N: the weights a trained target token multiplies in the model, the head's apart (the
        FLOPs that MFU counts, `seqjax.training.core.mfu`); None for a model that does not count them."""
        return None

    @classmethod
    def attention_flops(cls, cfg: ModelConfig, seq_len: int) -> int:
        """Forward and backward FLOPs per target token of attention's scores and values over
        rows of seq_len tokens (12·L·D·T per attention of L layers)."""
        return 0

    def embed(self, tokens: Array) -> Array:
        """tokens: [B, T] int32 -> [B, T, D] float32, the (target) lookup `embedded` may replace."""
        return self.token_embed(tokens)

    def target_embedding(self) -> Array:
        """The target embedding table [V, D] float32 (what a tied head scores with)."""
        return self.token_embed.embedding

    def embedded_targets(
        self, tokens: Array, mask: Array | None, embedded: Array | None, max_len: int | None = None
    ) -> Array:
        """Checks a teacher-forced call's tokens [B, T] int32 (T <= max_len), mask [B, T] bool
        or None and embedded [B, T, D] or None; returns [B, T, D] float32, `embedded` when
        given, else the lookup of `tokens`."""
        check_tokens(tokens, max_len=max_len)
        check_mask(mask, tokens)
        check_embedded(embedded, tokens, self.cfg.d_model)
        return self.token_embed(tokens) if embedded is None else embedded.astype(jnp.float32)


class EncoderDecoder(TokenModel):
    """A TokenModel that also reads a source sequence over its own vocabulary; a subclass's
    `setup` calls `setup_embeddings()` for the source ("src_embed") and target ("embed")
    tables."""

    has_encoder: ClassVar[bool] = True
    src_vocab_size: int
    dtype: Any = jnp.float32

    def setup_embeddings(self) -> None:
        self.source_embed = token_embedding(self.src_vocab_size, self.cfg.d_model, "src_embed")
        self.token_embed = token_embedding(self.vocab_size, self.cfg.d_model, "embed")


class PositionalInputs(nn.Module):
    """Embeddings scaled by √D (unless `cfg.scale_embeddings` is false) plus a position encoding
    (none for rope, which turns queries and keys inside attention instead), then dropout."""

    cfg: ModelConfig

    def setup(self) -> None:
        if self.cfg.positions == "learned":
            self.position_embed = nn.Embed(
                self.cfg.max_len, self.cfg.d_model, embedding_init=nn.initializers.normal(1.0)
            )
        self.dropout = nn.Dropout(self.cfg.dropout)

    def __call__(self, embedded: Array, positions: Array, train: bool = False) -> Array:
        """embedded: [B, T, D] lookups; positions: [B, T] or [T] int32 -> [B, T, D] float32."""
        x = embedded.astype(jnp.float32)
        if self.cfg.scale_embeddings:
            x = x * jnp.sqrt(float(self.cfg.d_model))
        if self.cfg.positions == "learned":
            x = x + self.position_embed(positions)
        elif self.cfg.positions == "sinusoidal":
            x = x + sinusoidal_positions(positions, self.cfg.d_model)
        return self.dropout(x, deterministic=not train)
