"""Transformer encoder–decoder (Vaswani et al. 2017).

The encoder is bidirectional self-attention under the source padding mask; each decoder
block adds cross-attention over the encoder output. For decoding, every layer's
cross-attention keys and values are computed once, in `init_decode_state`, and carried in
the state next to the self-attention KV cache.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from seqjax.models.checks import check_decode_size, check_source, check_tokens
from seqjax.models.embeddings import EncoderDecoder, PositionalInputs
from seqjax.models.masks import causal_mask, decode_mask, padding_mask
from seqjax.models.transformer import Block


class TransformerSeq2Seq(EncoderDecoder):
    """(src [B, S], tokens [B, T]) → hidden [B, T, D]; row t predicts target token t+1.

    Decode state: {"cache": per-layer {"k", "v"}: [B, max_len, heads, Dh],
    "memory": per-layer {"k", "v"}: [B, S, heads, Dh], "src_mask": [B, S] bool,
    "positions": [B] int32}.
    """

    def setup(self):
        self.setup_embeddings()
        self.source_inputs = PositionalInputs(self.cfg)
        self.target_inputs = PositionalInputs(self.cfg)
        self.encoder_blocks = [Block(self.cfg, dtype=self.dtype) for _ in range(self.cfg.layers)]
        self.decoder_blocks = [Block(self.cfg, cross=True, dtype=self.dtype) for _ in range(self.cfg.layers)]
        if self.cfg.norm == "pre":
            self.encoder_norm = nn.LayerNorm(dtype=self.dtype)
            self.decoder_norm = nn.LayerNorm(dtype=self.dtype)

    def _encode(self, src, src_mask, train):
        """Returns the per-layer cross-attention memories and the [B, S] source mask."""
        src_mask = jnp.ones(src.shape, bool) if src_mask is None else src_mask
        positions = jnp.arange(src.shape[1], dtype=jnp.int32)
        x = self.source_inputs(self.source_embed(src), positions, train)
        for block in self.encoder_blocks:
            x = block(x, padding_mask(src_mask), train=train)
        if self.cfg.norm == "pre":
            x = self.encoder_norm(x)
        memory = tuple(block.memory(x) for block in self.decoder_blocks)
        return memory, src_mask

    def _finish(self, x):
        if self.cfg.norm == "pre":
            x = self.decoder_norm(x)
        return x.astype(jnp.float32)

    def __call__(self, tokens, *, src=None, src_mask=None, mask=None, embedded=None, train: bool = False):
        """tokens: [B, T] int32; src: [B, S] int32; src_mask: [B, S] bool or None.

        mask: [B, T] bool or None; embedded: [B, T, D] or None. Returns [B, T, D] float32.
        """
        embedded = self.embedded_targets(tokens, mask, embedded, self.cfg.max_len)
        check_source(src, src_mask, tokens.shape[0])
        check_tokens(src, "src", max_len=self.cfg.max_len)
        memory, src_mask = self._encode(src, src_mask, train)
        length = tokens.shape[1]
        x = self.target_inputs(embedded, jnp.arange(length, dtype=jnp.int32), train)
        self_mask = causal_mask(length, self.cfg.window, self.cfg.dilation)
        if mask is not None:
            self_mask = self_mask & padding_mask(mask)
        for block, layer_memory in zip(self.decoder_blocks, memory):
            x = block(x, self_mask, layer_memory, padding_mask(src_mask), train=train)
        return self._finish(x)

    def init_decode_state(self, batch_size: int, max_len: int, src=None, src_mask=None):
        """Runs the encoder, projects its cross-attention keys/values, empties the caches."""
        check_decode_size(batch_size, max_len, self.cfg.max_len)
        check_source(src, src_mask, batch_size)
        check_tokens(src, "src", max_len=self.cfg.max_len)
        memory, src_mask = self._encode(src, src_mask, False)
        return {
            "cache": tuple(block.empty_cache(batch_size, max_len) for block in self.decoder_blocks),
            "memory": memory,
            "src_mask": src_mask,
            "positions": jnp.zeros((batch_size,), jnp.int32),
        }

    def decode_step(self, state, token):
        """token: [B] int32 -> (hidden [B, D] float32, next state); at most max_len steps."""
        positions = state["positions"]
        x = self.target_inputs(self.token_embed(token[:, None]), positions[:, None])
        max_len = state["cache"][0]["k"].shape[1]
        self_mask = decode_mask(positions, max_len, self.cfg.window, self.cfg.dilation)
        source_mask = padding_mask(state["src_mask"])
        caches = []
        for block, cache, memory in zip(self.decoder_blocks, state["cache"], state["memory"]):
            x, cache = block.decode(x, cache, positions, self_mask, memory, source_mask)
            caches.append(cache)
        next_state = {**state, "cache": tuple(caches), "positions": positions + 1}
        return self._finish(x[:, 0]), next_state
