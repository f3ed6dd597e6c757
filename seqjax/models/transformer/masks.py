"""Attention masks as small pure functions; True means "the query may attend to this key".

Masks broadcast against attention logits laid out [B, heads, T_query, T_key], so every
function returns its mask with those axes (size-1 where the mask does not vary). A
teacher-forced self-attention's mask is kept in parts (`SelfMask`), so that a fused kernel
can be given the structured part it expresses and the rest only when there is a rest.
"""

from __future__ import annotations

import flax.struct
import jax.numpy as jnp
from jax import Array


def window_mask(query_positions: Array, key_positions: Array, window: int = 0, dilation: int = 1) -> Array:
    """Causal (optionally sliding-window, optionally dilated) mask from absolute positions.

    A query at position q sees the keys at q, q - dilation, ..., q - (window - 1) * dilation
    (Longformer's dilated sliding window, restricted to the past); window=0 sees every key
    at or before q.

    Args:
      query_positions: [..., Tq] int32.
      key_positions: [..., Tk] int32 (broadcastable against the query's leading axes).
      window: keys attended per query, 0 for unbounded.
      dilation: gap between attended keys (1: contiguous).
    Returns:
      [..., Tq, Tk] bool.
    """
    distance = query_positions[..., :, None] - key_positions[..., None, :]
    allowed = distance >= 0
    if window > 0:
        allowed &= distance < window * dilation
        if dilation > 1:
            allowed &= distance % dilation == 0
    return allowed


def causal_mask(length: int, window: int = 0, dilation: int = 1) -> Array:
    """Mask of teacher-forced self-attention over one sequence.

    Returns:
      [1, 1, T, T] bool: row t is True at the keys position t may see.
    """
    positions = jnp.arange(length, dtype=jnp.int32)
    return window_mask(positions, positions, window, dilation)[None, None]


def padding_mask(mask: Array) -> Array:
    """Keys that are real tokens.

    Args:
      mask: [B, S] bool, True at valid tokens.
    Returns:
      [B, 1, 1, S] bool.
    """
    return mask[:, None, None, :]


def decode_mask(positions: Array, max_len: int, window: int = 0, dilation: int = 1) -> Array:
    """Mask of one decode step over a fixed-size KV cache.

    Args:
      positions: [B] int32, the position of the token being decoded in each row.
      max_len: cache length.
    Returns:
      [B, 1, 1, max_len] bool: the filled cache slots that position may see.
    """
    keys = jnp.arange(max_len, dtype=jnp.int32)
    return window_mask(positions[:, None], keys, window, dilation)[:, None]


def beam_slots_mask(mask: Array, slot_rows: Array, batch_size: int) -> Array:
    """The decode mask of N = B·R rows that share their batch row's KV cache of R blocks of M
    slots (`SharedByBeams`: a beam search's R beams).

    Args:
      mask: [N, 1, 1, M] bool, each row's `decode_mask`.
      slot_rows: [N, M] int32, the block that holds each position of the row's history.
    Returns:
      [B, 1, R, R·M] bool: row r of batch row b sees slot r'·M + s where its history's
      position s sits in block r' (the mask itself when R = 1).
    """
    rows, length = slot_rows.shape
    per_batch = rows // batch_size
    if per_batch == 1:
        return mask
    held = slot_rows[:, None, :] == jnp.arange(per_batch, dtype=slot_rows.dtype)[None, :, None]  # [N, R, M]
    return (held & mask[:, 0]).reshape(batch_size, 1, per_batch, per_batch * length)


def segment_mask(query_segments: Array, key_segments: Array) -> Array:
    """Keys of the query's own segment (packed rows: a line never sees another line).

    Args:
      query_segments: [B, Tq] int32 segment ids.
      key_segments: [B, Tk] int32 segment ids.
    Returns:
      [B, 1, Tq, Tk] bool.
    """
    return query_segments[:, None, :, None] == key_segments[:, None, None, :]


@flax.struct.dataclass
class SelfMask:
    """What each query of a teacher-forced self-attention over T tokens may see.

    causal, window, dilation (static): the structured part, `window_mask` over token indices
      when causal (window and dilation mean nothing without it), every key otherwise.
    valid: None, or [B, T] bool, the real tokens (a prefix of each row: batches are padded
      at the end); no key beyond them is seen.
    segments: None, or [B, T] int32 segment ids of packed rows; a query sees only its own.
    max_segments (static): the most segments a packed row holds (`data.max_segments`), the bound
      a kernel that takes packed rows as per-segment lengths and offsets is traced with (cuDNN's);
      0: no bound known, and such a kernel leaves packed rows to XLA.

    Kept in parts so that each fused kernel is given what it expresses: cuDNN's the lengths
    of the valid prefixes, the splash kernel's the segment ids.
    """

    valid: Array | None = None
    segments: Array | None = None
    causal: bool = flax.struct.field(pytree_node=False, default=True)
    window: int = flax.struct.field(pytree_node=False, default=0)
    dilation: int = flax.struct.field(pytree_node=False, default=1)
    max_segments: int = flax.struct.field(pytree_node=False, default=0)

    @property
    def extra(self) -> Array | None:
        """None, or the padding and segment part as bool broadcastable to [B, 1, T, T]."""
        extra = None if self.valid is None else padding_mask(self.valid)
        if self.segments is not None:
            same = segment_mask(self.segments, self.segments)
            extra = same if extra is None else extra & same
        return extra

    @property
    def lengths(self) -> Array | None:
        """[B] int32 real tokens per row, or None without padding."""
        return None if self.valid is None else self.valid.sum(axis=-1, dtype=jnp.int32)

    def dense(self, length: int) -> Array:
        """The whole mask as one bool array broadcastable to [B, 1, T, T]."""
        if self.causal:
            structured = causal_mask(length, self.window, self.dilation)
        else:
            structured = jnp.ones((1, 1, length, length), bool)
        extra = self.extra
        return structured if extra is None else structured & extra

    def key_range(self, start: int, end: int, length: int) -> tuple[int, int]:
        """[first, last + 1) of the keys that the structured part lets queries start..end-1
        (of T = `length`) see: every key outside is masked for all of them."""
        if not self.causal:
            return 0, length
        reach = (self.window - 1) * self.dilation if self.window else start
        return max(0, start - reach), end


def self_mask(
    *,
    causal: bool,
    window: int = 0,
    dilation: int = 1,
    valid: Array | None = None,
    segments: Array | None = None,
    max_segments: int = 0,
) -> SelfMask:
    """The SelfMask with optional key padding valid [B, T] bool (a prefix of each row) and
    segment ids segments [B, T] int32 of rows holding at most `max_segments` segments (0: no
    bound known; the structured part is built only where a kernel needs it densely)."""
    return SelfMask(valid, segments, causal, window, dilation, max_segments)
