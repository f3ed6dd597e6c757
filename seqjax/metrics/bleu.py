"""BLEU: sacrebleu on detokenized text (the published number), and the same formula on token ids in jit.

`sentence_bleu_ids` / `corpus_bleu_ids` reproduce `sacrebleu.sentence_bleu` /
`sacrebleu.corpus_bleu` on the space-joined ids with `tokenize="none"` (one reference),
including sacrebleu's details: no score without a single match, orders after the first
with no hypothesis n-gram dropped (sentence level, "effective order"), add-k from order
2 on, and exp smoothing halving each successive zero-match precision (Chen & Cherry,
2014). Scale 0-100, like sacrebleu.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from typing import Any, TypedDict, Unpack

import jax
import jax.numpy as jnp
import sacrebleu
from jax.typing import ArrayLike

from seqjax.metrics.ngrams import ngram_statistics
from seqjax.metrics.validation import check_id_batch, check_text_pairs

SMOOTHING_DEFAULTS = {"none": None, "floor": 0.1, "add-k": 1.0, "exp": None}


def corpus_bleu(
    hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "13a", smooth: str = "exp"
) -> float:
    """sacrebleu corpus BLEU (0-100) of detokenized hypotheses against one reference each.

    hypotheses, references: equally many str (host side); tokenize: a sacrebleu tokenizer name;
    smooth: none | floor | add-k | exp. Returns a Python float.

    Example:
      >>> from seqjax.metrics import corpus_bleu
      >>> round(corpus_bleu(["the cat sat on the mat"], ["the cat sat on a mat"]), 2)
      53.73
    """
    check_text_pairs(hypotheses, references)
    if tokenize not in sacrebleu.BLEU.TOKENIZERS:
        raise ValueError(f"tokenize must be one of {', '.join(sorted(sacrebleu.BLEU.TOKENIZERS))}, got {tokenize!r}")
    if smooth not in SMOOTHING_DEFAULTS:
        raise ValueError(f"smooth must be one of {', '.join(sorted(SMOOTHING_DEFAULTS))}, got {smooth!r}")
    bleu = sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize, smooth_method=smooth)
    return float(bleu.score)


def bleu_from_statistics(
    matches: ArrayLike,
    totals: ArrayLike,
    hyp_len: ArrayLike,
    ref_len: ArrayLike,
    *,
    smooth: str,
    smooth_value: float,
    effective_order: bool,
) -> jax.Array:
    """BLEU (0-100) from clipped matches and hypothesis n-gram counts.

    matches, totals: [..., max_order] (float or int); hyp_len, ref_len: [...] (float or int).
    smooth: none | floor | add-k | exp, with its smooth_value; effective_order: drop the
    orders after the first without hypothesis n-grams (sentence level). Returns [...] float32.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.metrics import bleu_from_statistics
      >>> counts = jnp.array([4, 3, 2, 1])  # every n-gram matches; 4 tokens against 5: brevity exp(1 − 5/4)
      >>> score = bleu_from_statistics(counts, counts, jnp.array(4), jnp.array(5), smooth="none",
      ...                              smooth_value=0.0, effective_order=False)
      >>> print(np.asarray(score).round(2))
      77.88
    """
    matches, totals = jnp.asarray(matches), jnp.asarray(totals)
    hyp_len, ref_len = jnp.asarray(hyp_len), jnp.asarray(ref_len)
    max_order = matches.shape[-1]
    matched = matches.astype(jnp.float32)
    total = totals.astype(jnp.float32)
    any_match = jnp.sum(matched, axis=-1) > 0
    if smooth == "add-k":
        added = jnp.where(jnp.arange(max_order) > 0, smooth_value, 0.0)
        matched, total = matched + added, total + added
    # sacrebleu stops at the first order without hypothesis n-grams.
    active = jnp.cumprod(total > 0, axis=-1).astype(bool)
    safe_total = jnp.where(total > 0, total, 1.0)
    no_match = active & (matched == 0)
    if smooth == "exp":
        zero_precision = 100.0 / (2.0 ** jnp.cumsum(no_match, axis=-1) * safe_total)
    elif smooth == "floor":
        zero_precision = 100.0 * smooth_value / safe_total
    else:
        zero_precision = jnp.zeros_like(safe_total)
    precision = jnp.where(active, jnp.where(no_match, zero_precision, 100.0 * matched / safe_total), 0.0)
    if effective_order:
        order = jnp.maximum(jnp.sum(active, axis=-1), 1)
    else:
        order = jnp.full(precision.shape[:-1], max_order)
    included = jnp.arange(max_order) < order[..., None]
    log_precision = jnp.where(precision > 0, jnp.log(jnp.where(precision > 0, precision, 1.0)), -jnp.inf)
    mean_log = jnp.sum(jnp.where(included, log_precision, 0.0), axis=-1) / order
    hyp_len = hyp_len.astype(jnp.float32)
    ref_len = ref_len.astype(jnp.float32)
    brevity = jnp.where(hyp_len < ref_len, jnp.exp(1.0 - ref_len / jnp.maximum(hyp_len, 1.0)), 1.0)
    brevity = jnp.where(hyp_len > 0, brevity, 0.0)
    return jnp.where(any_match, brevity * jnp.exp(mean_log), 0.0)


def _check_options(max_order: Any, smooth: Any, smooth_value: Any) -> float:
    if isinstance(max_order, bool) or not isinstance(max_order, numbers.Integral) or max_order <= 0:
        raise ValueError(f"max_order must be a positive int, got {max_order!r}")
    if smooth not in SMOOTHING_DEFAULTS:
        raise ValueError(f"smooth must be one of {', '.join(sorted(SMOOTHING_DEFAULTS))}, got {smooth!r}")
    if smooth_value is None:
        return SMOOTHING_DEFAULTS[smooth] or 0.0
    if (
        isinstance(smooth_value, bool)
        or not isinstance(smooth_value, numbers.Real)
        or not (math.isfinite(smooth_value) and float(smooth_value) >= 0)
    ):
        raise ValueError(f"smooth_value must be None or a finite number >= 0, got {smooth_value!r}")
    return float(smooth_value)


class BleuOptions(TypedDict, total=False):
    """The keyword options of `sentence_bleu_ids` and `corpus_bleu_ids`: max_order (default 4),
    smooth (none | floor | add-k | exp, default exp) and smooth_value for floor and add-k (None,
    the default: sacrebleu's 0.1 and 1)."""

    max_order: int
    smooth: str
    smooth_value: float | None


def sentence_bleu_ids(
    hyp: ArrayLike, hyp_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike, **options: Unpack[BleuOptions]
) -> jax.Array:
    """Sentence BLEU (0-100) of each row, as `sacrebleu.sentence_bleu` (effective order on).

    hyp: [B, T] int, hyp_len: [B] int, ref: [B, S] int, ref_len: [B] int; ids past a
    row's length are ignored; `options` as `BleuOptions`. Returns [B] float32. Jittable.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.metrics import sentence_bleu_ids
      >>> hyp, hyp_len = jnp.array([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]]), jnp.array([5, 3])
      >>> ref, ref_len = jnp.array([[5, 6, 7, 8, 9], [5, 6, 7, 8, 0]]), jnp.array([5, 4])
      >>> print(np.asarray(sentence_bleu_ids(hyp, hyp_len, ref, ref_len)).round(2))
      [100.    71.65]
    """
    return _bleu_ids(hyp, hyp_len, ref, ref_len, options, corpus=False)


def corpus_bleu_ids(
    hyp: ArrayLike, hyp_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike, **options: Unpack[BleuOptions]
) -> jax.Array:
    """Corpus BLEU (0-100) of all rows together, as `sacrebleu.corpus_bleu` (statistics summed).

    Arguments as in `sentence_bleu_ids`. Returns [] float32. Jittable.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.metrics import corpus_bleu_ids
      >>> ids = jnp.array([[5, 6, 7, 8, 9], [5, 6, 7, 8, 0]])  # hypothesis 2 stops after 3 ids, its reference after 4
      >>> print(np.asarray(corpus_bleu_ids(ids, jnp.array([5, 3]), ids, jnp.array([5, 4]))).round(2))
      88.25
    """
    return _bleu_ids(hyp, hyp_len, ref, ref_len, options, corpus=True)


def _bleu_ids(
    hyp: ArrayLike, hyp_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike, options: BleuOptions, *, corpus: bool
) -> jax.Array:
    """Sentence (`corpus` False) or corpus BLEU of the ids, the options and ids checked on the host first."""
    unknown = sorted(set(options) - set(BleuOptions.__annotations__))
    if unknown:
        raise TypeError(
            f"unexpected BLEU option(s) {', '.join(unknown)}; the options are {', '.join(BleuOptions.__annotations__)}"
        )
    max_order, smooth = options.get("max_order", 4), options.get("smooth", "exp")
    smooth_value = _check_options(max_order, smooth, options.get("smooth_value"))
    check_id_batch(hyp, hyp_len, ref, ref_len)
    result: jax.Array = _bleu_program(
        hyp, hyp_len, ref, ref_len, max_order=max_order, smooth=smooth, smooth_value=smooth_value, corpus=corpus
    )
    return result


@functools.partial(jax.jit, static_argnames=("max_order", "smooth", "smooth_value", "corpus"))
def _bleu_program(
    hyp: jax.Array,
    hyp_len: jax.Array,
    ref: jax.Array,
    ref_len: jax.Array,
    *,
    max_order: int,
    smooth: str,
    smooth_value: float,
    corpus: bool,
) -> jax.Array:
    matches, totals, _ = ngram_statistics(hyp, hyp_len, ref, ref_len, max_order)
    if corpus:  # one score of the statistics summed over the rows, every order kept
        matches, totals, hyp_len, ref_len = (jnp.sum(x, axis=0) for x in (matches, totals, hyp_len, ref_len))
    return bleu_from_statistics(
        matches, totals, hyp_len, ref_len, smooth=smooth, smooth_value=smooth_value, effective_order=not corpus
    )
