"""Transformer blocks (pre- or post-LayerNorm, optional cross-attention) and the Transformer LM.

Decoding keeps a KV cache per layer, [B, max_len, heads, Dh] each for keys and values,
and a [B] int32 position per row: a step writes one slot and attends over the whole
fixed-size buffer under a mask, so its cost does not grow with the prefix.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from seqjax.config import ModelConfig
from seqjax.models.attention import CrossAttention, SelfAttention
from seqjax.models.checks import check_decode_size
from seqjax.models.embeddings import PositionalInputs, TokenModel, token_embedding
from seqjax.models.masks import causal_mask, decode_mask, padding_mask


class Block(nn.Module):
    """Self-attention [→ cross-attention] → feed-forward, each a residual sublayer.

    `cfg.norm == "pre"` normalizes each sublayer's input (x + f(LN(x))); "post" normalizes
    after the residual add (LN(x + f(x))), as in the original Transformer.
    """

    cfg: ModelConfig
    cross: bool = False
    dtype: Any = jnp.float32

    def setup(self):
        d, heads = self.cfg.d_model, self.cfg.num_heads
        self.self_attention = SelfAttention(d, heads, self.dtype)
        self.self_norm = nn.LayerNorm(dtype=self.dtype)
        if self.cross:
            self.cross_attention = CrossAttention(d, heads, self.dtype)
            self.cross_norm = nn.LayerNorm(dtype=self.dtype)
        self.ff_in = nn.Dense(self.cfg.d_ff, dtype=self.dtype)
        self.ff_out = nn.Dense(d, dtype=self.dtype)
        self.ff_norm = nn.LayerNorm(dtype=self.dtype)
        self.dropout = nn.Dropout(self.cfg.dropout)

    def _enter(self, norm, x):
        return norm(x) if self.cfg.norm == "pre" else x

    def _leave(self, norm, x, y, train):
        x = x + self.dropout(y, deterministic=not train).astype(jnp.float32)
        return x if self.cfg.norm == "pre" else norm(x).astype(jnp.float32)

    def _feed_forward(self, x, train):
        y = self.ff_out(nn.gelu(self.ff_in(self._enter(self.ff_norm, x))))
        return self._leave(self.ff_norm, x, y, train)

    def _cross(self, x, memory, memory_mask, train):
        y = self.cross_attention(self._enter(self.cross_norm, x), memory, memory_mask)
        return self._leave(self.cross_norm, x, y, train)

    def __call__(self, x, mask, memory=None, memory_mask=None, train: bool = False):
        """x: [B, T, D] float32; mask: bool broadcastable to [B, heads, T, T].

        memory, memory_mask: CrossAttention.memory of the encoder output and its
        [B, 1, 1, S] mask, for blocks built with cross=True. Returns [B, T, D] float32.
        """
        y = self.self_attention(self._enter(self.self_norm, x), mask)
        x = self._leave(self.self_norm, x, y, train)
        if self.cross:
            x = self._cross(x, memory, memory_mask, train)
        return self._feed_forward(x, train)

    def decode(self, x, cache, positions, mask, memory=None, memory_mask=None):
        """x: [B, 1, D] float32; cache, positions, mask as in SelfAttention.decode."""
        y, cache = self.self_attention.decode(self._enter(self.self_norm, x), cache, positions, mask)
        x = self._leave(self.self_norm, x, y, False)
        if self.cross:
            x = self._cross(x, memory, memory_mask, False)
        return self._feed_forward(x, False), cache

    def memory(self, encoded):
        """encoded: [B, S, D] -> this block's cross-attention {"k", "v"}: [B, S, heads, Dh]."""
        return self.cross_attention.memory(encoded)

    def empty_cache(self, batch_size: int, max_len: int):
        shape = (batch_size, max_len, self.cfg.num_heads, self.cfg.d_model // self.cfg.num_heads)
        return {"k": jnp.zeros(shape, self.dtype), "v": jnp.zeros(shape, self.dtype)}


class TransformerLM(TokenModel):
    """Decoder-only Transformer: tokens [B, T] → hidden [B, T, D] (row t predicts token t+1).

    Self-attention is causal, limited to `cfg.window` keys spaced `cfg.dilation` apart
    when window > 0. Decode state: {"cache": per-layer {"k", "v"}, "positions": [B] int32}.
    """

    dtype: Any = jnp.float32

    def setup(self):
        self.token_embed = token_embedding(self.vocab_size, self.cfg.d_model, "embed")
        self.inputs = PositionalInputs(self.cfg)
        self.blocks = [Block(self.cfg, dtype=self.dtype) for _ in range(self.cfg.layers)]
        if self.cfg.norm == "pre":
            self.final_norm = nn.LayerNorm(dtype=self.dtype)

    def _finish(self, x):
        if self.cfg.norm == "pre":
            x = self.final_norm(x)
        return x.astype(jnp.float32)

    def __call__(self, tokens, *, mask=None, embedded=None, train: bool = False):
        """tokens: [B, T] int32; mask: [B, T] bool or None; embedded: [B, T, D] or None.

        Returns hidden: [B, T, D] float32.
        """
        embedded = self.embedded_targets(tokens, mask, embedded, self.cfg.max_len)
        length = tokens.shape[1]
        x = self.inputs(embedded, jnp.arange(length, dtype=jnp.int32), train)
        attention_mask = causal_mask(length, self.cfg.window, self.cfg.dilation)
        if mask is not None:
            attention_mask = attention_mask & padding_mask(mask)
        for block in self.blocks:
            x = block(x, attention_mask, train=train)
        return self._finish(x)

    def init_decode_state(self, batch_size: int, max_len: int):
        """Empty KV caches of max_len ≤ cfg.max_len slots; every leaf has leading axis B."""
        check_decode_size(batch_size, max_len, self.cfg.max_len)
        return {
            "cache": tuple(block.empty_cache(batch_size, max_len) for block in self.blocks),
            "positions": jnp.zeros((batch_size,), jnp.int32),
        }

    def decode_step(self, state, token):
        """token: [B] int32 -> (hidden [B, D] float32, next state).

        Valid for at most max_len steps (the cache size given to init_decode_state).
        """
        positions = state["positions"]
        x = self.inputs(self.token_embed(token[:, None]), positions[:, None])
        max_len = state["cache"][0]["k"].shape[1]
        mask = decode_mask(positions, max_len, self.cfg.window, self.cfg.dilation)
        caches = []
        for block, cache in zip(self.blocks, state["cache"]):
            x, cache = block.decode(x, cache, positions, mask)
            caches.append(cache)
        return self._finish(x[:, 0]), {"cache": tuple(caches), "positions": positions + 1}
