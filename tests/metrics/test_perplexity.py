"""Perplexity: exp of the mean NLL per token or per word, 1 for an empty count."""

import jax
import numpy as np
import pytest

from seqjax.metrics import perplexity, word_perplexity


def test_perplexity_is_exp_of_the_mean_nll_per_token():
    np.testing.assert_allclose(perplexity(np.array([6.0, 0.0]), np.array([3, 5])), np.exp([2.0, 0.0]), rtol=1e-6)


def test_uniform_model_has_perplexity_equal_to_the_vocabulary_size():
    np.testing.assert_allclose(perplexity(100 * np.log(7.0), 100), 7.0, rtol=1e-5)


def test_word_perplexity_spreads_the_token_nll_over_words():
    np.testing.assert_allclose(word_perplexity(12.0, 4), np.exp(3.0), rtol=1e-6)


def test_empty_count_gives_perplexity_one_not_a_division_by_zero():
    assert float(perplexity(0.0, 0)) == 1.0
    assert float(jax.jit(perplexity)(0.0, 0)) == 1.0


def test_negative_counts_raise():
    with pytest.raises(ValueError, match="tokens must be >= 0, got -1"):
        perplexity(1.0, -1)
    with pytest.raises(ValueError, match="words must be >= 0, got -2"):
        word_perplexity(1.0, -2)
