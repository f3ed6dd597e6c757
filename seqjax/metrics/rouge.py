"""ROUGE-1, ROUGE-2 and ROUGE-L F-measures (Lin, 2004): on token lists and text (host), on ids (jit).

ROUGE-N: overlap = sum over distinct n-grams of min(count in hypothesis, count in
reference); P = overlap / hypothesis n-grams, R = overlap / reference n-grams.
ROUGE-L: the longest common subsequence in place of the overlap, over tokens. F is the
harmonic mean 2PR / (P + R), 0 when either side has no n-grams. Scale 0-1.
Text is lowercased and split into maximal runs of Unicode letters and digits (like the
rouge-score package, but keeping non-ASCII letters; no stemming).
"""

from __future__ import annotations

import collections
import functools
import re
from collections.abc import Hashable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from seqjax.metrics.ngrams import ngram_statistics
from seqjax.metrics.validation import check_id_batch, check_text_pairs

_WORD = re.compile(r"[^\W_]+")


def rouge_tokens(text: str) -> list[str]:
    """The words ROUGE compares: lowercased runs of letters and digits.

    Example:
      >>> from seqjax.metrics import rouge_tokens
      >>> rouge_tokens("Hello, World! Größe 42x")
      ['hello', 'world', 'größe', '42x']
    """
    return _WORD.findall(text.lower())


def _f_measure(overlap: int, hyp_count: int, ref_count: int) -> float:
    precision = overlap / max(hyp_count, 1)
    recall = overlap / max(ref_count, 1)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _check_order(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"n must be a positive int, got {n!r}")


def rouge_n(hypothesis: Sequence[Hashable], reference: Sequence[Hashable], n: int) -> float:
    """ROUGE-N F-measure (a float in [0, 1]) of two token sequences (host side), n >= 1.

    Example:
      >>> from seqjax.metrics import rouge_n
      >>> rouge_n("a b c".split(), "a b d".split(), 2)  # bigram (a, b) of two on each side
      0.5
    """
    _check_order(n)

    def grams(tokens: list) -> collections.Counter:
        return collections.Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))

    hyp_grams, ref_grams = grams(list(hypothesis)), grams(list(reference))
    overlap = sum(min(count, ref_grams[gram]) for gram, count in hyp_grams.items())
    return _f_measure(overlap, sum(hyp_grams.values()), sum(ref_grams.values()))


def rouge_l(hypothesis: Sequence[Hashable], reference: Sequence[Hashable]) -> float:
    """ROUGE-L F-measure (a float in [0, 1]) of two token sequences (longest common subsequence).

    Example:
      >>> from seqjax.metrics import rouge_l
      >>> round(rouge_l("a b c d".split(), "a c d".split()), 4)  # LCS a c d: P = 3/4, R = 1
      0.8571
    """
    hypothesis, reference = list(hypothesis), list(reference)
    lcs = [[0] * (len(reference) + 1) for _ in range(len(hypothesis) + 1)]
    for i, token in enumerate(hypothesis, start=1):
        for j, other in enumerate(reference, start=1):
            lcs[i][j] = lcs[i - 1][j - 1] + 1 if token == other else max(lcs[i - 1][j], lcs[i][j - 1])
    return _f_measure(lcs[-1][-1], len(hypothesis), len(reference))


def rouge(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1/2/L F-measures over pairs of texts: {"rouge1", "rouge2", "rougeL"} in [0, 1].

    hypotheses, references: equally many str (host side), at least one.

    Example:
      >>> from seqjax.metrics import rouge
      >>> {name: round(value, 4) for name, value in rouge(["The cat sat."], ["the cat ran"]).items()}
      {'rouge1': 0.6667, 'rouge2': 0.5, 'rougeL': 0.6667}
    """
    check_text_pairs(hypotheses, references)
    if not hypotheses:
        raise ValueError("hypotheses must hold at least one text, got 0")
    pairs = [(rouge_tokens(h), rouge_tokens(r)) for h, r in zip(hypotheses, references)]
    return {
        "rouge1": float(np.mean([rouge_n(h, r, 1) for h, r in pairs])),
        "rouge2": float(np.mean([rouge_n(h, r, 2) for h, r in pairs])),
        "rougeL": float(np.mean([rouge_l(h, r) for h, r in pairs])),
    }


def _f_measure_ids(overlap: jax.Array, hyp_count: jax.Array, ref_count: jax.Array) -> jax.Array:
    overlap = overlap.astype(jnp.float32)
    precision = overlap / jnp.maximum(hyp_count, 1)
    recall = overlap / jnp.maximum(ref_count, 1)
    total = precision + recall
    return jnp.where(total > 0, 2 * precision * recall / jnp.where(total > 0, total, 1.0), 0.0)


def rouge_n_ids(hyp: ArrayLike, hyp_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike, *, n: int) -> jax.Array:
    """ROUGE-N F-measure of each row. hyp: [B, T] int, hyp_len: [B], ref: [B, S] int, ref_len: [B].

    Ids past a row's length are ignored. Returns [B] float32. Jittable.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.metrics import rouge_n_ids
      >>> hyp, hyp_len = jnp.array([[5, 6, 7, 8], [5, 6, 7, 0]]), jnp.array([4, 3])
      >>> ref, ref_len = jnp.array([[5, 6, 7, 8], [5, 6, 7, 8]]), jnp.array([4, 4])
      >>> print(np.asarray(rouge_n_ids(hyp, hyp_len, ref, ref_len, n=2)).round(4))  # 2nd: P = 1, R = 2/3
      [1.  0.8]
    """
    _check_order(n)
    check_id_batch(hyp, hyp_len, ref, ref_len)
    result: jax.Array = _rouge_n_program(hyp, hyp_len, ref, ref_len, n=n)
    return result


def rouge_l_ids(hyp: ArrayLike, hyp_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike) -> jax.Array:
    """ROUGE-L F-measure of each row; arguments as in `rouge_n_ids`. Returns [B] float32. Jittable.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.metrics import rouge_l_ids
      >>> hyp, hyp_len = jnp.array([[5, 6, 7, 8], [5, 7, 8, 0]]), jnp.array([4, 3])
      >>> ref, ref_len = jnp.array([[5, 6, 7, 8], [5, 6, 7, 8]]), jnp.array([4, 4])
      >>> print(np.asarray(rouge_l_ids(hyp, hyp_len, ref, ref_len)).round(4))  # 2nd: LCS 5 7 8
      [1.     0.8571]
    """
    check_id_batch(hyp, hyp_len, ref, ref_len)
    result: jax.Array = _rouge_l_program(hyp, hyp_len, ref, ref_len)
    return result


@functools.partial(jax.jit, static_argnames=("n",))
def _rouge_n_program(hyp: jax.Array, hyp_len: jax.Array, ref: jax.Array, ref_len: jax.Array, *, n: int) -> jax.Array:
    matches, hyp_counts, ref_counts = ngram_statistics(hyp, hyp_len, ref, ref_len, n)
    return _f_measure_ids(matches[:, -1], hyp_counts[:, -1], ref_counts[:, -1])


@jax.jit
def _rouge_l_program(hyp: jax.Array, hyp_len: jax.Array, ref: jax.Array, ref_len: jax.Array) -> jax.Array:
    ref_valid = jnp.arange(ref.shape[1]) < ref_len[:, None]

    def next_row(row: jax.Array, inputs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        # LCS row i from row i-1: L[i, j] = cummax_j max(L[i-1, j], L[i-1, j-1] + [h_i == r_j]).
        token, position = inputs
        match = (token[:, None] == ref) & ref_valid & (position < hyp_len)[:, None]
        diagonal = jnp.pad(row, ((0, 0), (1, 0)))[:, :-1]
        extended = jnp.maximum(row, jnp.where(match, diagonal + 1, 0))
        return jax.lax.cummax(extended, axis=1), None

    start = jnp.zeros(ref.shape, jnp.int32)
    last_row, _ = jax.lax.scan(next_row, start, (hyp.T, jnp.arange(hyp.shape[1])))
    lcs = last_row[:, -1] if ref.shape[1] else jnp.zeros(hyp.shape[:1], jnp.int32)
    return _f_measure_ids(lcs, hyp_len, ref_len)
