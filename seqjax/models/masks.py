"""Attention masks as small pure functions; True means "the query may attend to this key".

Masks broadcast against attention logits laid out [B, heads, T_query, T_key], so every
function returns its mask with those axes (size-1 where the mask does not vary).
"""

from __future__ import annotations

import jax.numpy as jnp


def window_mask(query_positions, key_positions, window: int = 0, dilation: int = 1):
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


def causal_mask(length: int, window: int = 0, dilation: int = 1):
    """Mask of teacher-forced self-attention over one sequence.

    Returns:
      [1, 1, T, T] bool: row t is True at the keys position t may see.
    """
    positions = jnp.arange(length, dtype=jnp.int32)
    return window_mask(positions, positions, window, dilation)[None, None]


def padding_mask(mask):
    """Keys that are real tokens.

    Args:
      mask: [B, S] bool, True at valid tokens.
    Returns:
      [B, 1, 1, S] bool.
    """
    return mask[:, None, None, :]


def decode_mask(positions, max_len: int, window: int = 0, dilation: int = 1):
    """Mask of one decode step over a fixed-size KV cache.

    Args:
      positions: [B] int32, the position of the token being decoded in each row.
      max_len: cache length.
    Returns:
      [B, 1, 1, max_len] bool: the filled cache slots that position may see.
    """
    keys = jnp.arange(max_len, dtype=jnp.int32)
    return window_mask(positions[:, None], keys, window, dilation)[:, None]
