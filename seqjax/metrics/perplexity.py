"""Perplexity from a summed negative log-likelihood: exp(nll_sum / count), per token or per word.

An empty count gives perplexity 1 (the geometric mean of no probabilities), not a
division by zero. Jittable; the count is checked on the host when it is concrete.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike


def _check_count(name: str, count: ArrayLike) -> None:
    if not isinstance(count, jax.core.Tracer) and np.any(np.asarray(count) < 0):
        raise ValueError(f"{name} must be >= 0, got {count}")


def perplexity(nll_sum: ArrayLike, tokens: ArrayLike) -> jax.Array:
    """exp(nll_sum / tokens). nll_sum: [...] float nats summed over `tokens`: [...] predictions.

    Returns [...] float32.

    Example:
      >>> import math
      >>> from seqjax.metrics import perplexity
      >>> round(float(perplexity(10 * math.log(4.0), 10)), 4)  # ten tokens at p = 1/4 each
      4.0
    """
    _check_count("tokens", tokens)
    count = jnp.asarray(tokens, jnp.float32)
    return jnp.exp(jnp.asarray(nll_sum, jnp.float32) / jnp.maximum(count, 1.0))


def word_perplexity(nll_sum: ArrayLike, words: ArrayLike) -> jax.Array:
    """exp(nll_sum / words): the NLL of all (sub)word tokens of a text spread over its words.

    Comparable across tokenizers (characters, BPE, words) of the same text. nll_sum: [...]
    float; words: [...] whitespace-separated words. Returns [...] float32.

    Example:
      >>> import math
      >>> from seqjax.metrics import word_perplexity
      >>> round(float(word_perplexity(10 * math.log(4.0), 5)), 4)  # ten tokens at 1/4 spelling 5 words
      16.0
    """
    _check_count("words", words)
    count = jnp.asarray(words, jnp.float32)
    return jnp.exp(jnp.asarray(nll_sum, jnp.float32) / jnp.maximum(count, 1.0))
