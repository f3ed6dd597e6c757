"""Clipped n-gram matches between padded id sequences, with static shapes: the core of BLEU and ROUGE-N on ids.

For every hypothesis n-gram, equality with every other hypothesis n-gram and every
reference n-gram is one boolean matrix ([B, T, T] and [B, T, S]); order n's matrices are
order n-1's shifted and AND-ed with the unigram ones. A hypothesis n-gram counts
min(count in hypothesis, count in reference) at its first occurrence, so the sum over
positions is the sum over distinct n-grams that BLEU and ROUGE define.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def ngram_statistics(
    hyp: ArrayLike, hyp_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike, max_order: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Clipped matches and n-gram counts for the orders 1..max_order.

    hyp: [B, T] int, hyp_len: [B] int, ref: [B, S] int, ref_len: [B] int; ids past a
    row's length are ignored. Returns matches, hyp_counts, ref_counts: [B, max_order] int32.

    Example:
      >>> import jax.numpy as jnp
      >>> from seqjax.metrics import ngram_statistics
      >>> matches, hyp_counts, ref_counts = ngram_statistics(
      ...     jnp.array([[1, 2, 1, 2]]), jnp.array([4]), jnp.array([[1, 2, 3]]), jnp.array([3]), 2)
      >>> matches.tolist(), hyp_counts.tolist(), ref_counts.tolist()  # (1, 2) matches once, clipped
      ([[2, 1]], [[4, 3]], [[3, 2]])
    """
    hyp, hyp_len, ref, ref_len = jnp.asarray(hyp), jnp.asarray(hyp_len), jnp.asarray(ref), jnp.asarray(ref_len)
    hyp_length, ref_length = hyp.shape[1], ref.shape[1]
    hyp_len = hyp_len.astype(jnp.int32)[:, None]
    ref_len = ref_len.astype(jnp.int32)[:, None]
    unigram_hh = hyp[:, :, None] == hyp[:, None, :]
    unigram_hr = hyp[:, :, None] == ref[:, None, :]
    same_hh, same_hr = unigram_hh, unigram_hr
    matched, hyp_total, ref_total = [], [], []
    for n in range(1, max_order + 1):
        hyp_grams, ref_grams = max(hyp_length - n + 1, 0), max(ref_length - n + 1, 0)
        if n > 1:
            same_hh = same_hh[:, :hyp_grams, :hyp_grams] & unigram_hh[:, n - 1 :, n - 1 :]
            same_hr = same_hr[:, :hyp_grams, :ref_grams] & unigram_hr[:, n - 1 :, n - 1 :]
        hyp_valid = jnp.arange(hyp_grams) + n <= hyp_len  # [B, T - n + 1]
        ref_valid = jnp.arange(ref_grams) + n <= ref_len
        in_hyp = same_hh & hyp_valid[:, None, :]
        count_in_hyp = jnp.sum(in_hyp, axis=-1)
        count_in_ref = jnp.sum(same_hr & ref_valid[:, None, :], axis=-1)
        earlier = jnp.arange(hyp_grams)[None, :] < jnp.arange(hyp_grams)[:, None]
        first = hyp_valid & ~jnp.any(in_hyp & earlier, axis=-1)
        matched.append(jnp.sum(jnp.where(first, jnp.minimum(count_in_hyp, count_in_ref), 0), axis=-1))
        hyp_total.append(jnp.sum(hyp_valid, axis=-1))
        ref_total.append(jnp.sum(ref_valid, axis=-1))
    matches, hyp_counts, ref_counts = (jnp.stack(c, axis=-1).astype(jnp.int32) for c in (matched, hyp_total, ref_total))
    return matches, hyp_counts, ref_counts
