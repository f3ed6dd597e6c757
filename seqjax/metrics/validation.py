"""Host-side checks shared by the metrics: batches of padded ids, and pairs of texts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def check_text_pairs(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise ValueError(
            "hypotheses and references must be sequences of strings (one per sentence), got "
            f"{type(hypotheses).__name__} and {type(references).__name__}"
        )
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses and references must have equal length, got {len(hypotheses)} and {len(references)}"
        )


def check_id_batch(hyp: Any, hyp_len: Any, ref: Any, ref_len: Any) -> None:
    """Host checks of hyp [B, T], hyp_len [B], ref [B, S], ref_len [B] (integer arrays).

    Shapes and dtypes are always checked; the lengths' values (0 <= hyp_len <= T,
    0 <= ref_len <= S) when they are concrete, not traced inside a caller's jit.
    """
    for name, array, ndim in (("hyp", hyp, 2), ("hyp_len", hyp_len, 1), ("ref", ref, 2), ("ref_len", ref_len, 1)):
        if jnp.ndim(array) != ndim or not jnp.issubdtype(jnp.result_type(array), jnp.integer):
            raise ValueError(
                f"{name} must be a {ndim}-D integer array, got shape {jnp.shape(array)} dtype {jnp.result_type(array)}"
            )
    batch = jnp.shape(hyp)[0]
    if jnp.shape(hyp_len) != (batch,) or jnp.shape(ref)[0] != batch or jnp.shape(ref_len) != (batch,):
        raise ValueError(
            f"hyp [B, T], hyp_len [B], ref [B, S], ref_len [B] must share B, got shapes "
            f"{jnp.shape(hyp)}, {jnp.shape(hyp_len)}, {jnp.shape(ref)}, {jnp.shape(ref_len)}"
        )
    for name, lengths, limit in (("hyp_len", hyp_len, jnp.shape(hyp)[1]), ("ref_len", ref_len, jnp.shape(ref)[1])):
        if isinstance(lengths, jax.core.Tracer):
            continue
        values = np.asarray(lengths)
        if values.size and (values.min() < 0 or values.max() > limit):
            raise ValueError(f"{name} must lie in [0, {limit}], got values in [{values.min()}, {values.max()}]")
