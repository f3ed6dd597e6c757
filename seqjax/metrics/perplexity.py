"""Perplexity from a summed negative log-likelihood: exp(nll_sum / count), per token or per word.

An empty count gives perplexity 1 (the geometric mean of no probabilities), not a
division by zero. Jittable; the count is checked on the host when it is concrete.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _check_count(name: str, count) -> None:
    if not isinstance(count, jax.core.Tracer) and np.any(np.asarray(count) < 0):
        raise ValueError(f"{name} must be >= 0, got {count}")


def perplexity(nll_sum: jax.Array | float, tokens: jax.Array | int) -> jax.Array:
    """exp(nll_sum / tokens). nll_sum: [...] float nats summed over `tokens`: [...] predictions.

    Returns [...] float32.
    """
    _check_count("tokens", tokens)
    count = jnp.asarray(tokens, jnp.float32)
    return jnp.exp(jnp.asarray(nll_sum, jnp.float32) / jnp.maximum(count, 1.0))


def word_perplexity(nll_sum: jax.Array | float, words: jax.Array | int) -> jax.Array:
    """exp(nll_sum / words): the NLL of all (sub)word tokens of a text spread over its words.

    Comparable across tokenizers (characters, BPE, words) of the same text. nll_sum: [...]
    float; words: [...] whitespace-separated words. Returns [...] float32.
    """
    _check_count("words", words)
    count = jnp.asarray(words, jnp.float32)
    return jnp.exp(jnp.asarray(nll_sum, jnp.float32) / jnp.maximum(count, 1.0))
