"""Scaled dot-product attention: self-attention with a KV cache, cross-attention, rotary
positions and grouped-query attention.

With `model.kv_heads` = K < H, keys and values have K heads, each shared by H / K consecutive
query heads (grouped-query attention; K = 1 is multi-query), and the KV cache and the
cross-attention memory hold only those K. Logits and softmax are float32 whatever the operand
dtype.

Two layouts, one per kind of attention:

- Teacher-forced self-attention keeps activations [B, T, heads, Dh] from projection to
  output and runs on the kernel the model was built with (`model.attention_kernel`, resolved by
  `build_model`; `attention_kernels.dispatch.attend`), which runs on XLA what it cannot express.
- Keys and values that are stored and read many times — the KV cache of a decode step and
  the cross-attention memory — are laid out [B, K, M, Dh] and read by `stored_attention`, an
  explicit grouped einsum whose batch axes (B, K) lead both operands. Given [B, M, K, Dh],
  XLA on CPU transposes the whole cache to that order at every step (each layer, keys and
  values), which cost more than the step's matmuls; this layout reads the cache once.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import Array, lax

from seqjax.config import ModelConfig
from seqjax.models.attention_kernels.dispatch import attend
from seqjax.models.base import dense_axes
from seqjax.models.matmul.step_dense import apply_dense
from seqjax.models.transformer.masks import SelfMask
from seqjax.models.transformer.positions import rope_scaling, rotary


def head_counts(cfg: ModelConfig) -> tuple[int, int, int]:
    """(query heads H, key/value heads K, head width Dh) of `cfg`; kv_heads 0 means H, head_dim 0
    d_model / H."""
    heads = cfg.num_heads
    return heads, cfg.kv_heads or heads, cfg.head_width


def write_cache(buffer: Array, update: Array, slots: Array, layer: Array | None = None) -> Array:
    """Writes each row's new entry at that row's own slot, in place.

    Args:
      buffer: [B, K, S, Dh] cache, or [B, L, K, S, Dh] for every layer of a scanned stack,
        written at `layer` ([] int32). Row n belongs to batch row n // (N / B): a beam
        search's beams share their batch row's cache (`SharedByBeams`).
      update: [N, 1, K, Dh] new keys or values, as projected.
      slots: [N] int32, the slot each row writes.
    Returns:
      the buffer with one slot per row replaced.
    """
    rows = update.shape[0]
    batch = jnp.arange(rows) // (rows // buffer.shape[0])
    values = update[:, 0].astype(buffer.dtype)  # [N, K, Dh]
    if layer is None:
        return buffer.at[batch, :, slots].set(values)
    return buffer.at[batch, layer, :, slots].set(values)


def by_batch_row(q: Array, batch_size: int) -> Array:
    """q [N, T, H, Dh] -> [B, N / B · T, H, Dh]: the rows of one batch row (a beam search's
    beams) become queries of that row, which then attend over its shared keys and values."""
    return q.reshape(batch_size, -1, *q.shape[2:])


def empty_cache(cfg: ModelConfig, batch_size: int, max_len: int, dtype: Any) -> dict[str, Array]:
    """One layer's empty KV cache {"k", "v"}: [B, K, max_len, Dh] each, K the kv heads."""
    _, kv_heads, head_dim = head_counts(cfg)
    shape = (batch_size, kv_heads, max_len, head_dim)
    return {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}


def stored_attention(q: Array, keys: Array, values: Array, mask: Array) -> Array:
    """Grouped attention of queries over stored keys and values (a KV cache, a memory).

    Query head h reads key/value head h // G (G = H / K), as in `jax.nn.dot_product_attention`.

    Args:
      q: [B, T, H, Dh] queries.
      keys, values: [B, K, M, Dh].
      mask: bool [B, 1, T, M] (B and T may be 1, broadcast), the slots each query attends
        to; every query must see at least one.
    Returns:
      [B, T, H, Dh] in the keys' dtype.
    """
    batch, length, heads, head_dim = q.shape
    kv_heads, slots = keys.shape[1], keys.shape[2]
    group = heads // kv_heads
    # Per (B, K) both products are plain matmuls over the stored [M, Dh] rows: keys · queries^T
    # gives logits [M, G·T] and probs^T · values the output. In other operand orders XLA on CPU
    # repacked the whole cache at every call or ran the products several times slower.
    grouped = q.astype(keys.dtype).reshape(batch, length, kv_heads, group, head_dim)
    grouped = jnp.transpose(grouped, (0, 2, 3, 1, 4)).reshape(batch, kv_heads, group * length, head_dim)
    logits = jnp.einsum("bkmd,bkqd->bkmq", keys, grouped, preferred_element_type=jnp.float32)
    logits = logits.reshape(batch, kv_heads, slots, group, length)
    visible = jnp.swapaxes(mask, 2, 3)[:, :, :, None]  # [B, 1, M, 1, T]
    logits = jnp.where(visible, logits / math.sqrt(head_dim), jnp.finfo(jnp.float32).min)
    if length == 1:
        # One query per batch row (greedy decoding, sampling): the softmax over [B, K, G, M]
        # reduces the minor axis, which XLA on CPU ran about three times as fast as the same
        # reduction over M ahead of G (a greedy step 6-10% faster).
        probs = jnp.swapaxes(jax.nn.softmax(jnp.swapaxes(logits[..., 0], 2, 3), axis=-1), 2, 3)
    else:
        probs = jax.nn.softmax(logits, axis=2)
    probs = probs.astype(values.dtype).reshape(batch, kv_heads, slots, group * length)
    attended = jnp.einsum("bkmq,bkmd->bkqd", probs, values).reshape(batch, kv_heads, group, length, head_dim)
    return jnp.transpose(attended, (0, 3, 1, 2, 4)).reshape(batch, length, heads, head_dim)


# Kernels' logical axes. The fused projections' 3 (query, key, value) or 2 (key, value) axis is
# never split: each device computes all three for its heads.
QKV_AXES = ("embed", None, "heads", "head_dim")  # [D, 3 | 2, H | K, Dh]
QUERY_AXES = ("embed", "heads", "head_dim")  # [D, H, Dh]
OUT_AXES = ("heads", "head_dim", "embed")  # [H, Dh, D]


def _output(cfg: ModelConfig, dtype: Any) -> nn.DenseGeneral:
    """The output projection [H, Dh, D], with model.bias's bias."""
    return nn.DenseGeneral(cfg.d_model, axis=(-2, -1), use_bias=cfg.bias, dtype=dtype, **dense_axes(OUT_AXES, 2))


def _projection(
    cfg: ModelConfig, features: tuple[int, ...], dtype: Any, kernel_axes: tuple[str | None, ...]
) -> nn.DenseGeneral:
    """A query, key or value projection [D, *features], biased with model.bias or model.qkv_bias."""
    return nn.DenseGeneral(features, use_bias=cfg.bias or cfg.qkv_bias, dtype=dtype, **dense_axes(kernel_axes))


def _head_norm(cfg: ModelConfig, dtype: Any) -> nn.RMSNorm:
    """model.qk_norm's RMSNorm of each query or key head: its scale [Dh]."""
    scale = nn.with_logical_partitioning(nn.initializers.ones, ("head_dim",))
    return nn.RMSNorm(epsilon=cfg.norm_eps, dtype=dtype, scale_init=scale)


class SelfAttention(nn.Module):
    """Self-attention; queries, keys and values from one fused [D, 3, H, Dh] projection when
    K = H, else a [D, H, Dh] query and a fused [D, 2, K, Dh] key/value projection; the output
    projection [H, Dh, D]. Dh = model.head_dim, else D / H. With model.qk_norm, each query and
    key head is RMS-normalized (query_norm, key_norm: scale [Dh]) before rope."""

    cfg: ModelConfig
    dtype: Any = jnp.float32
    kernel: str = dataclasses.field(kw_only=True)  # the registered kernel of the teacher-forced pass

    def setup(self) -> None:
        heads, kv_heads, head_dim = head_counts(self.cfg)
        if kv_heads == heads:
            self.qkv = _projection(self.cfg, (3, heads, head_dim), self.dtype, QKV_AXES)
        else:
            self.query = _projection(self.cfg, (heads, head_dim), self.dtype, QUERY_AXES)
            self.kv = _projection(self.cfg, (2, kv_heads, head_dim), self.dtype, QKV_AXES)
        self.out = _output(self.cfg, self.dtype)
        if self.cfg.qk_norm:
            self.query_norm = _head_norm(self.cfg, self.dtype)
            self.key_norm = _head_norm(self.cfg, self.dtype)

    def _project(self, x: Array, positions: Array, step: bool = False) -> tuple[Array, Array, Array]:
        """x [B, T, D], positions [B, T] or [T] -> q [B, T, H, Dh], k, v [B, T, K, Dh]; `step`:
        a decode step's products (`apply_dense`)."""
        if self.cfg.kv_heads in (0, self.cfg.num_heads):
            qkv = apply_dense(self.qkv, x, step)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        else:
            kv = apply_dense(self.kv, x, step)
            q, k, v = apply_dense(self.query, x, step), kv[:, :, 0], kv[:, :, 1]
        cfg = self.cfg
        if cfg.qk_norm:
            q, k = self.query_norm(q), self.key_norm(k)
        if cfg.positions == "rope":
            turn = (positions, cfg.rope_base, cfg.max_len, rope_scaling(cfg))
            q, k = rotary(q, *turn), rotary(k, *turn)
        return q, k, v

    def __call__(self, x: Array, positions: Array, mask: SelfMask) -> Array:
        """x: [B, T, D]; positions: [B, T] or [T] int32 (rope reads them); mask: what each
        query sees. Returns [B, T, D]."""
        q, k, v = self._project(x, positions)
        return self.out(attend(q, k, v, mask, self.kernel))

    def decode(
        self, x: Array, cache: dict[str, Array], positions: Array, slots: Array, mask: Array, layer: Array | None = None
    ) -> tuple[Array, dict[str, Array]]:
        """One step of N rows against their KV cache; the cost is fixed by the cache size.

        Args:
          x: [N, 1, D] the new token's activations; N = B·R, the R rows of a batch row
            sharing its cache (R = 1 but in beam search, whose beams are the R rows).
          cache: {"k", "v"}: [B, K, R·M, Dh] each, or [B, L, K, R·M, Dh] with `layer` ([] int32)
            the one this attention reads and writes (a scanned stack updates its whole cache in
            place, one slot per layer, instead of moving it layer by layer).
          positions: [N] int32, each token's position (rope turns its query and key by it).
          slots: [N] int32, where each row's new keys and values are written.
          mask: [B, 1, R, R·M] bool, the slots each row's token attends to.
        Returns:
          [N, 1, D], the updated cache.
        """
        # A scanned stack (layer given) slices its kernels inside the layer loop, where a
        # transposed copy would be made at every step: plain products there.
        step = layer is None
        q, k, v = self._project(x, positions[:, None], step)
        cache = {"k": write_cache(cache["k"], k, slots, layer), "v": write_cache(cache["v"], v, slots, layer)}
        keys, values = cache["k"], cache["v"]
        if layer is not None:
            keys, values = (lax.dynamic_index_in_dim(c, layer, axis=1, keepdims=False) for c in (keys, values))
        attended = stored_attention(by_batch_row(q, keys.shape[0]), keys, values, mask).reshape(q.shape)
        return apply_dense(self.out, attended, step), cache


class CrossAttention(nn.Module):
    """Attention of decoder queries over encoder outputs ("memory"), without rotary turns:
    source and target positions are not on one axis."""

    cfg: ModelConfig
    dtype: Any = jnp.float32

    def setup(self) -> None:
        heads, kv_heads, head_dim = head_counts(self.cfg)
        self.query = _projection(self.cfg, (heads, head_dim), self.dtype, QUERY_AXES)
        self.kv = _projection(self.cfg, (2, kv_heads, head_dim), self.dtype, QKV_AXES)
        self.out = _output(self.cfg, self.dtype)

    def memory(self, encoded: Array) -> dict[str, Array]:
        """encoded: [B, S, D] -> {"k", "v"}: [B, K, S, Dh], computed once per source."""
        kv = jnp.moveaxis(self.kv(encoded), 1, 3)  # [B, 2, K, S, Dh]
        return {"k": kv[:, 0], "v": kv[:, 1]}

    def __call__(self, x: Array, memory: dict[str, Array], mask: Array, step: bool = False) -> Array:
        """x: [N, T, D], N = B·R rows, the R rows of a batch row (beam search's beams) reading
        its memory from `memory`; mask: bool broadcastable to [B, 1, T, S] (source padding, and
        segments in packed rows; R = 1 then); `step`: a decode step's products (`apply_dense`).
        Returns [N, T, D]."""
        q = apply_dense(self.query, x, step)
        attended = stored_attention(by_batch_row(q, memory["k"].shape[0]), memory["k"], memory["v"], mask)
        return apply_dense(self.out, attended.reshape(q.shape), step)
