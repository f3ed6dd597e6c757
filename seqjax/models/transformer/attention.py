"""Scaled dot-product attention: self-attention with a KV cache, cross-attention, rotary
positions and grouped-query attention.

With `model.kv_heads` = K < H, keys and values have K heads, each shared by H / K consecutive
query heads (grouped-query attention; K = 1 is multi-query), and the KV cache and the
cross-attention memory hold only those K. Logits and softmax are float32 whatever the operand
dtype.

Two layouts, one per kind of attention:

- Teacher-forced self-attention keeps activations [B, T, heads, Dh] from projection to
  output; `model.attention_kernel` picks the kernel (`attend`). cuDNN's fused kernel (through
  `jax.nn.dot_product_attention`) is given only what it expresses — `is_causal` and a
  contiguous `local_window_size` — so padding, segment ids (packed rows) or a dilated window
  run on XLA, in `dense_attention`, under one boolean mask.
- Keys and values that are stored and read many times — the KV cache of a decode step and
  the cross-attention memory — are laid out [B, K, M, Dh] and read by `stored_attention`, an
  explicit grouped einsum whose batch axes (B, K) lead both operands. Given [B, M, K, Dh],
  XLA on CPU transposes the whole cache to that order at every step (each layer, keys and
  values), which cost more than the step's matmuls; this layout reads the cache once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import Array, lax

from seqjax.config import ATTENTION_KERNELS, ModelConfig
from seqjax.models.attention_kernels.dense import dense_attention
from seqjax.models.attention_kernels.splash import BLOCK as SPLASH_BLOCK
from seqjax.models.attention_kernels.splash import splash_attention, splash_expresses
from seqjax.models.matmul.step_dense import apply_dense
from seqjax.models.transformer.masks import SelfMask
from seqjax.models.transformer.positions import rotary
from seqjax.placement import same_placement


def head_counts(cfg: ModelConfig) -> tuple[int, int, int]:
    """(query heads H, key/value heads K, head width Dh) of `cfg`; kv_heads 0 means H."""
    heads = cfg.num_heads
    return heads, cfg.kv_heads or heads, cfg.d_model // heads


def resolve_kernel(kernel: str, dtype: Any, head_dim: int, platform: str) -> str:
    """The implementation ("xla" | "cudnn" | "splash") `kernel` ("auto" or one of those) means
    on devices of `platform` ("cpu" | "gpu" | "tpu", the run's mesh's): auto is cuDNN on a GPU
    for 16-bit operands and head widths it supports (≤ 128, multiple of 8), the Pallas splash
    kernel on a TPU for head widths that are a multiple of 128, XLA otherwise."""
    if kernel != "auto":
        return kernel
    sixteen_bits = jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
    if platform == "gpu" and sixteen_bits and head_dim <= 128 and head_dim % 8 == 0:
        return "cudnn"
    if platform == "tpu" and head_dim % 128 == 0:
        return "splash"
    return "xla"


def cudnn_arguments(mask: SelfMask) -> dict[str, Any] | None:
    """The arguments of `jax.nn.dot_product_attention` that express `mask` — `is_causal`, a
    contiguous `local_window_size`, and padding as the lengths of the rows' valid prefixes
    (`query_seq_lengths`, `key_value_seq_lengths`) — or None where the mask has a part they
    cannot express (segment ids of packed rows, a dilated window)."""
    if mask.segments is not None or mask.dilation != 1:
        return None
    window = (mask.window - 1, 0) if mask.causal and mask.window else None
    arguments: dict[str, Any] = {"is_causal": mask.causal, "local_window_size": window}
    if mask.valid is not None:
        arguments.update(query_seq_lengths=mask.lengths, key_value_seq_lengths=mask.lengths)
    return arguments


def kernel_fallback(kernel: str, *, packed: bool, dilated: bool, lengths: tuple[int, ...]) -> str | None:
    """Why the fused `kernel` (resolved) leaves some of a run's teacher-forced self-attention to
    XLA — packed rows, a dilated window, rows of `lengths` tokens the kernel does not tile — or
    None where it runs all of it."""
    if kernel == "cudnn" and packed:
        return (
            "cuDNN's fused attention (jax.nn.dot_product_attention) takes no segment ids: packed rows "
            "(data.packing) attend on XLA"
        )
    if kernel in ("cudnn", "splash") and dilated:
        return f"the {kernel} kernel has no dilated window (model.dilation > 1): self-attention runs on XLA"
    untiled = sorted({n for n in lengths if n % SPLASH_BLOCK})
    if kernel == "splash" and untiled:
        return (
            f"the splash kernel tiles rows by {SPLASH_BLOCK} tokens: rows of {', '.join(map(str, untiled))} tokens "
            "attend on XLA"
        )
    return None


QUERY_BLOCK = 64  # queries per block of `attend` on XLA, unless that makes more than MAX_QUERY_BLOCKS
MAX_QUERY_BLOCKS = 16  # bounds the program's size (each block is its own products) on long rows


def query_blocks(length: int) -> list[tuple[int, int]]:
    """[start, end) of the blocks of queries `attend` computes one at a time on XLA: QUERY_BLOCK
    each, more where that would make more than MAX_QUERY_BLOCKS blocks."""
    size = max(QUERY_BLOCK, -(-length // MAX_QUERY_BLOCKS))
    return [(start, min(start + size, length)) for start in range(0, length, size)]


def attend(q: Array, k: Array, v: Array, mask: SelfMask, kernel: str) -> Array:
    """Teacher-forced self-attention of q [B, T, H, Dh] over k, v [B, T, K, Dh] under `mask`,
    with `kernel` resolved ("xla" | "cudnn" | "splash"): the fused kernel where it expresses the
    mask (cuDNN's, or the Pallas splash kernel on a TPU), else `dense_attention` under the whole
    mask, block of queries by block of queries (`query_blocks`), each over only the keys the
    mask's causal part and window let it see.

    Blocks skip the keys masked for all of their queries (a causal mask's upper triangle, the
    keys before a window's reach), and keep each block's logits small enough for the caches.
    Measured forward and backward on a 2-core AMD EPYC (Zen 3), 8 query and 2 key/value heads
    of 64, causal, in one process: 21 ms in one block against 14 ms in blocks at B=16, T=128
    (2 blocks; torch's fused `scaled_dot_product_attention` 17 ms), 82 against 42 ms at B=4,
    T=512 (8 blocks; torch 59 ms). A query that sees no key averages the values of its block's
    key range (its output is undefined either way). Returns [B, T, H, Dh]."""
    if kernel == "splash" and splash_expresses(mask, q.shape[1]):
        return splash_attention(q, k, v, mask)
    arguments = cudnn_arguments(mask) if kernel == "cudnn" else None
    if arguments is not None:
        q, k, v = same_placement(q, k, v)
        return jax.nn.dot_product_attention(q, k, v, implementation="cudnn", **arguments)
    length = q.shape[1]
    dense = mask.dense(length)  # broadcastable to [B, 1, T, T]
    outputs = []
    for start, end in query_blocks(length):
        first, last = mask.key_range(start, end, length)
        rows = dense if dense.shape[-2] == 1 else dense[..., start:end, :]
        block_mask = rows[..., first:last]
        outputs.append(dense_attention(q[:, start:end], k[:, first:last], v[:, first:last], block_mask))
    return outputs[0] if len(outputs) == 1 else jnp.concatenate(outputs, axis=1)


for _kernel in ("xla", "cudnn", "splash"):
    ATTENTION_KERNELS.register(_kernel, functools.partial(attend, kernel=_kernel))


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


def _dense(
    cfg: ModelConfig, features: int | tuple[int, ...], dtype: Any, axis: int | tuple[int, ...] = -1
) -> nn.DenseGeneral:
    return nn.DenseGeneral(features, axis=axis, use_bias=cfg.bias, dtype=dtype)


class SelfAttention(nn.Module):
    """Self-attention; queries, keys and values from one fused [D, 3, H, Dh] projection when
    K = H, else a [D, H, Dh] query and a fused [D, 2, K, Dh] key/value projection."""

    cfg: ModelConfig
    dtype: Any = jnp.float32

    def setup(self) -> None:
        heads, kv_heads, head_dim = head_counts(self.cfg)
        if kv_heads == heads:
            self.qkv = _dense(self.cfg, (3, heads, head_dim), self.dtype)
        else:
            self.query = _dense(self.cfg, (heads, head_dim), self.dtype)
            self.kv = _dense(self.cfg, (2, kv_heads, head_dim), self.dtype)
        self.out = _dense(self.cfg, self.cfg.d_model, self.dtype, axis=(-2, -1))

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
        if cfg.positions == "rope":
            q, k = rotary(q, positions, cfg.rope_base, cfg.max_len), rotary(k, positions, cfg.rope_base, cfg.max_len)
        return q, k, v

    def __call__(self, x: Array, positions: Array, mask: SelfMask) -> Array:
        """x: [B, T, D]; positions: [B, T] or [T] int32 (rope reads them); mask: what each
        query sees. Returns [B, T, D]."""
        q, k, v = self._project(x, positions)
        # build_model resolves auto from the run's devices; a module built by hand resolves here.
        kernel = resolve_kernel(self.cfg.attention_kernel, q.dtype, q.shape[-1], jax.default_backend())
        return self.out(attend(q, k, v, mask, kernel))

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
        self.query = _dense(self.cfg, (heads, head_dim), self.dtype)
        self.kv = _dense(self.cfg, (2, kv_heads, head_dim), self.dtype)
        self.out = _dense(self.cfg, self.cfg.d_model, self.dtype, axis=(-2, -1))

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
