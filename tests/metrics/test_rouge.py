"""ROUGE-1/2/L against hand-computed values; the jitted id versions against the token-list versions."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.metrics import rouge, rouge_l, rouge_l_ids, rouge_n, rouge_n_ids, rouge_tokens


def test_rouge_of_a_one_word_substitution_by_hand():
    # Unigram overlap the x2, cat, on, mat = 5 of 6 each side; bigrams 3 of 5; LCS "the cat on the mat" = 5.
    scores = rouge(["the cat sat on the mat"], ["the cat is on the mat"])
    assert scores == pytest.approx({"rouge1": 5 / 6, "rouge2": 3 / 5, "rougeL": 5 / 6})


def test_rouge_l_rewards_in_order_matches_only():
    # Lin (2004): against "police killed the gunman", "police kill the gunman" has LCS 3,
    # "the gunman kill police" LCS 2, although both share 3 unigrams with the reference.
    reference = "police killed the gunman".split()
    assert rouge_l("police kill the gunman".split(), reference) == pytest.approx(3 / 4)
    assert rouge_l("the gunman kill police".split(), reference) == pytest.approx(2 / 4)
    assert rouge_n("the gunman kill police".split(), reference, 1) == pytest.approx(3 / 4)


def test_f_measure_is_the_harmonic_mean_of_precision_and_recall():
    # P = 2/2, R = 2/4.
    assert rouge_n(["a", "b"], ["a", "b", "c", "d"], 1) == pytest.approx(2 * 1 * 0.5 / 1.5)


def test_clipped_overlap_counts_a_repeated_word_at_most_as_often_as_the_reference():
    # Overlap min(3, 1) = 1: P = 1/3, R = 1/2.
    assert rouge_n(["the", "the", "the"], ["the", "cat"], 1) == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


def test_empty_or_too_short_sides_score_zero():
    assert rouge_n([], ["a"], 1) == 0.0
    assert rouge_n(["a"], ["a"], 2) == 0.0
    assert rouge_l([], []) == 0.0


def test_text_is_lowercased_and_split_on_non_alphanumerics_keeping_unicode_letters():
    assert rouge_tokens("Größe, the_END!  3 items") == ["größe", "the", "end", "3", "items"]
    assert rouge(["Hello, World!"], ["hello world"]) == pytest.approx({"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0})


def test_corpus_rouge_is_the_mean_over_pairs():
    scores = rouge(["a b", "c d"], ["a b", "x y"])
    assert scores == pytest.approx({"rouge1": 0.5, "rouge2": 0.5, "rougeL": 0.5})


id_rows = st.lists(st.integers(0, 3), min_size=0, max_size=7)


@given(st.lists(st.tuples(id_rows, id_rows), min_size=1, max_size=6))
@settings(max_examples=30, deadline=None)
def test_id_versions_equal_the_token_list_versions(pairs):
    width = 7

    def pad(rows):
        return np.array([row + [0] * (width - len(row)) for row in rows], np.int32)

    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    hyp, ref = pad(hyps), pad(refs)
    hyp_len, ref_len = np.array([len(h) for h in hyps]), np.array([len(r) for r in refs])
    for n in (1, 2):
        np.testing.assert_allclose(
            rouge_n_ids(hyp, hyp_len, ref, ref_len, n=n), [rouge_n(h, r, n) for h, r in pairs], rtol=1e-6
        )
    np.testing.assert_allclose(rouge_l_ids(hyp, hyp_len, ref, ref_len), [rouge_l(h, r) for h, r in pairs], rtol=1e-6)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        rouge_n(["a"], ["a"], 0)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        rouge_n_ids(jnp.zeros((1, 2), jnp.int32), jnp.array([2]), jnp.zeros((1, 2), jnp.int32), jnp.array([2]), n=0)
    with pytest.raises(ValueError, match="ref_len must lie in \\[0, 2\\]"):
        rouge_l_ids(jnp.zeros((1, 2), jnp.int32), jnp.array([2]), jnp.zeros((1, 2), jnp.int32), jnp.array([3]))
    with pytest.raises(ValueError, match="equal length"):
        rouge(["a"], [])
