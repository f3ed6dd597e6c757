"""Interpolated Kneser–Ney: normalization, a hand-computed case, perplexity, host checks."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.models.classic.ngram import fit

V = 6


@settings(max_examples=25, deadline=None)
@given(
    stream=st.lists(st.integers(0, V - 1), min_size=1, max_size=40),
    order=st.integers(1, 4),
    context=st.lists(st.integers(0, V - 1), max_size=4),
    discount=st.floats(0.1, 1.0),
)
def test_probabilities_sum_to_one_over_the_vocabulary(stream, order, context, discount):
    model = fit(stream, order, vocab_size=V, discount=discount)
    total = sum(math.exp(model.log_prob(context, token)) for token in range(V))
    assert total == pytest.approx(1.0, abs=1e-9)


def test_bigram_probability_matches_the_hand_computed_formula():
    # Stream a b a c (a=0, b=1, c=2), V=4, δ=0.5.
    model = fit([0, 1, 0, 2], order=2, vocab_size=4, discount=0.5)
    # Unigram continuation counts N1+(• w): b←a, a←b, c←a: {a:1, b:1, c:1}, total 3.
    # P1(b) = (1 - .5 + .5 * 3 * 1/4) / 3 = 0.875 / 3
    unigram_b = (1 - 0.5 + 0.5 * 3 * 0.25) / 3
    # Bigram counts after a: {b:1, c:1}, total 2, N1+(a •)=2.
    expected = (1 - 0.5 + 0.5 * 2 * unigram_b) / 2
    assert math.exp(model.log_prob([0], 1)) == pytest.approx(expected)
    # Unseen context d=3 backs off to the unigram.
    assert math.exp(model.log_prob([3], 1)) == pytest.approx(unigram_b)


def test_perplexity_is_exp_of_mean_negative_log_prob_over_histories():
    stream = [0, 1, 2, 0, 1, 3, 0, 1, 2]
    model = fit(stream, order=3, vocab_size=V)
    log_probs = [model.log_prob(stream[max(0, t - 2) : t], stream[t]) for t in range(len(stream))]
    expected = math.exp(-np.mean(log_probs))
    assert model.perplexity(stream) == pytest.approx(expected)
    assert model.perplexity(stream) < V


def test_history_is_the_context_of_the_first_tokens_but_is_not_scored():
    stream, history = [1, 2, 0, 1], [3, 0]
    model = fit([0, 1, 2, 3, 0, 1, 2, 0, 1, 3], order=3, vocab_size=V)
    ids = history + stream
    expected = -sum(model.log_prob(ids[t - 2 : t], ids[t]) for t in range(len(history), len(ids)))
    assert model.nll_sum(stream, history=history) == pytest.approx(expected)
    assert model.perplexity(stream, history=history) == pytest.approx(math.exp(expected / len(stream)))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"stream": [0, 1], "order": 0}, "order must be an int >= 1, got 0"),
        ({"stream": [0, 1], "order": 2, "discount": 0.0}, r"discount must be in \(0, 1\], got 0.0"),
        (
            {"stream": [0, 7], "order": 2, "vocab_size": 5},
            "stream ids must be >= 0 and < vocab_size=5",
        ),
        ({"stream": [], "order": 2}, "stream must hold at least one token"),
    ],
)
def test_invalid_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fit(**kwargs)


def test_out_of_vocabulary_query_is_rejected():
    model = fit([0, 1, 2], order=2, vocab_size=3)
    with pytest.raises(ValueError, match="token ids must be >= 0 and < vocab_size=3, got range"):
        model.log_prob([0], 3)


def test_saved_counts_load_as_the_same_model(tmp_path):
    model = fit([0, 1, 2, 1, 2, 3, 1, 2, 0], 3, vocab_size=5)
    model.save(tmp_path / "counts.npz")
    loaded = type(model).load(tmp_path / "counts.npz")
    assert loaded == model and loaded.size == model.size == 16
