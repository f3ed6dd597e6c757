"""Multi-head scaled dot-product attention: self-attention with a KV cache, and cross-attention.

Activations stay [B, T, heads, Dh] from projection to output — the layout
`jax.nn.dot_product_attention` takes — so no transposes are spent on head axes; its
logits and softmax are float32 whatever the operand dtype.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax


def write_cache(buffer, update, positions):
    """Writes each row's new entry at that row's own position.

    Args:
      buffer: [B, M, heads, Dh] cache.
      update: [B, 1, heads, Dh] new keys or values.
      positions: [B] int32, slot to write in each row.
    Returns:
      [B, M, heads, Dh], the buffer with one slot per row replaced.
    """
    return jax.vmap(lambda rows, row, at: lax.dynamic_update_slice_in_dim(rows, row, at, 0))(
        buffer, update.astype(buffer.dtype), positions
    )


class SelfAttention(nn.Module):
    """Self-attention with one fused [D, 3, heads, Dh] projection for queries, keys, values."""

    d_model: int
    heads: int
    dtype: Any = jnp.float32

    def setup(self):
        head_dim = self.d_model // self.heads
        self.qkv = nn.DenseGeneral((3, self.heads, head_dim), dtype=self.dtype, name="qkv")
        self.out = nn.DenseGeneral(self.d_model, axis=(-2, -1), dtype=self.dtype, name="out")

    def __call__(self, x, mask):
        """x: [B, T, D]; mask: bool broadcastable to [B, heads, T, T]. Returns [B, T, D]."""
        qkv = self.qkv(x)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        return self.out(jax.nn.dot_product_attention(q, k, v, mask=mask))

    def decode(self, x, cache, positions, mask):
        """One step against the KV cache; the cost is fixed by the cache size M.

        Args:
          x: [B, 1, D] the new token's activations.
          cache: {"k", "v"}: [B, M, heads, Dh] each.
          positions: [B] int32, where the new token's keys and values are written.
          mask: [B, 1, 1, M] bool, the slots the new token attends to.
        Returns:
          [B, 1, D], the updated cache.
        """
        qkv = self.qkv(x)
        cache = {
            "k": write_cache(cache["k"], qkv[:, :, 1], positions),
            "v": write_cache(cache["v"], qkv[:, :, 2], positions),
        }
        q = qkv[:, :, 0].astype(cache["k"].dtype)
        attended = jax.nn.dot_product_attention(q, cache["k"], cache["v"], mask=mask)
        return self.out(attended), cache


class CrossAttention(nn.Module):
    """Attention of decoder queries over encoder outputs ("memory")."""

    d_model: int
    heads: int
    dtype: Any = jnp.float32

    def setup(self):
        head_dim = self.d_model // self.heads
        self.query = nn.DenseGeneral((self.heads, head_dim), dtype=self.dtype, name="query")
        self.kv = nn.DenseGeneral((2, self.heads, head_dim), dtype=self.dtype, name="kv")
        self.out = nn.DenseGeneral(self.d_model, axis=(-2, -1), dtype=self.dtype, name="out")

    def memory(self, encoded):
        """encoded: [B, S, D] -> {"k", "v"}: [B, S, heads, Dh], computed once per source."""
        kv = self.kv(encoded)
        return {"k": kv[:, :, 0], "v": kv[:, :, 1]}

    def __call__(self, x, memory, mask):
        """x: [B, T, D]; memory from `memory`; mask: [B, 1, 1, S] bool. Returns [B, T, D]."""
        q = self.query(x).astype(memory["k"].dtype)
        return self.out(jax.nn.dot_product_attention(q, memory["k"], memory["v"], mask=mask))
