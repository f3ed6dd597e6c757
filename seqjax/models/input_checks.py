"""Host-side checks of what callers hand a model, run while tracing (shapes are static).

Token values cannot be checked here — under `jit` they are tracers; the data layer
validates ids before batching. These checks catch wrong shapes, dtypes and sizes, and
positions out of range when they are concrete.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import Array


def check_tokens(tokens: Array, name: str = "tokens", max_len: int | None = None) -> None:
    """tokens: [B, T] integer, T ≤ max_len when the model has a length bound."""
    if np.ndim(tokens) != 2 or not np.issubdtype(np.dtype(tokens.dtype), np.integer):
        raise ValueError(f"{name} must be a [B, T] integer array, got shape {np.shape(tokens)} dtype {tokens.dtype}")
    if max_len is not None and tokens.shape[1] > max_len:
        raise ValueError(f"{name} length must be <= model.max_len={max_len}, got {tokens.shape[1]}")


def check_mask(mask: Array | None, tokens: Array, name: str = "mask") -> None:
    """mask: None or [B, T] bool with the tokens' shape."""
    if mask is None:
        return
    if np.shape(mask) != np.shape(tokens) or np.dtype(mask.dtype) != np.bool_:
        raise ValueError(
            f"{name} must be a bool array of shape {np.shape(tokens)}, got shape {np.shape(mask)} dtype {mask.dtype}"
        )


def check_packing(
    segment_ids: Array | None, positions: Array | None, tokens: Array, max_len: int, prefix: str = ""
) -> None:
    """segment_ids, positions: None or [B, T] integer with the tokens' shape, positions in
    [0, max_len) when concrete (position tables are gathered, and a gather clamps); segment
    ids (a packed row) need their per-segment positions."""
    for name, value in (("segment_ids", segment_ids), ("positions", positions)):
        if value is None:
            continue
        if np.shape(value) != np.shape(tokens) or not np.issubdtype(np.dtype(value.dtype), np.integer):
            raise ValueError(
                f"{prefix}{name} must be an integer array of shape {np.shape(tokens)}, "
                f"got shape {np.shape(value)} dtype {value.dtype}"
            )
    if positions is not None and not isinstance(positions, jax.core.Tracer) and np.size(positions):
        values = np.asarray(positions)
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= max_len:
            raise ValueError(
                f"{prefix}positions must lie in [0, model.max_len={max_len}), got values in [{low}, {high}]"
            )
    if segment_ids is not None and positions is None:
        raise ValueError(f"{prefix}segment_ids need {prefix}positions (each token's position in its segment), got None")


def check_embedded(embedded: Array | None, tokens: Array, width: int) -> None:
    """embedded: None or [B, T, D] replacing the embedding lookup of `tokens`."""
    if embedded is None:
        return
    expected = (*np.shape(tokens), width)
    if np.shape(embedded) != expected:
        raise ValueError(f"embedded must have shape {expected}, got {np.shape(embedded)}")


def check_decode_size(batch_size: int, max_len: int, limit: int | None = None) -> None:
    """batch_size, max_len: positive Python ints, max_len ≤ limit when the model has one."""
    for name, value in (("batch_size", batch_size), ("max_len", max_len)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if limit is not None and max_len > limit:
        raise ValueError(f"max_len must be <= model.max_len={limit}, got {max_len}")


def check_source(src: Array | None, src_mask: Array | None, batch_size: int) -> Array:
    """src: [B, S] integer with B == batch_size; src_mask: None or [B, S] bool. Returns src."""
    if src is None:
        raise ValueError("src must be a [B, S] integer array for a seq2seq model, got None")
    check_tokens(src, "src")
    check_mask(src_mask, src, "src_mask")
    if src.shape[0] != batch_size:
        raise ValueError(f"src batch must equal the target batch {batch_size}, got {src.shape[0]}")
    return src
