"""Proposal samplers: stated probabilities, empirical frequencies, log expected counts."""

import jax
import numpy as np
import pytest
from scipy import stats

from seqjax.heads import samplers

VOCAB = 10
COUNTS = np.array([40, 25, 12, 9, 5, 3, 2, 2, 1, 1])
ROWS = 20000  # independent draws of K samples each, vmapped


def all_samplers():
    return {
        "uniform": (samplers.uniform(VOCAB), np.full(VOCAB, 1 / VOCAB)),
        "log_uniform": (
            samplers.log_uniform(VOCAB),
            (np.log(np.arange(VOCAB) + 2) - np.log(np.arange(VOCAB) + 1)) / np.log(VOCAB + 1),
        ),
        "unigram": (samplers.unigram(COUNTS, power=0.75), COUNTS**0.75 / (COUNTS**0.75).sum()),
    }


@pytest.mark.parametrize("name", ["uniform", "log_uniform", "unigram"])
def test_sampler_log_prob_equals_stated_distribution(name):
    sampler, probs = all_samplers()[name]
    np.testing.assert_allclose(np.exp(sampler.log_prob(np.arange(VOCAB))), probs, rtol=1e-5)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-12)


@pytest.mark.parametrize("name", ["uniform", "log_uniform", "unigram"])
def test_sampler_frequencies_match_probabilities_by_chi_square(name):
    sampler, probs = all_samplers()[name]
    drawn = sampler.sample(jax.random.key(7), 9, num_rows=ROWS)
    observed = np.bincount(np.asarray(drawn.ids).ravel(), minlength=VOCAB)
    _, p_value = stats.chisquare(observed, observed.sum() * probs)
    assert p_value > 1e-4, (observed, observed.sum() * probs)


@pytest.mark.parametrize("name", ["uniform", "log_uniform", "unigram"])
def test_log_expected_counts_with_replacement_are_log_k_q(name):
    sampler, probs = all_samplers()[name]
    drawn = sampler.sample(jax.random.key(1), 6)
    np.testing.assert_allclose(drawn.log_expected_counts, np.log(6 * probs[np.asarray(drawn.ids)]), rtol=1e-5)


@pytest.mark.parametrize("name", ["log_uniform", "unigram"])
def test_unique_sampling_inclusion_frequencies_match_stated_expected_counts(name):
    sampler, probs = all_samplers()[name]
    num_samples = 4
    drawn = sampler.sample(jax.random.key(3), num_samples, unique=True, num_rows=ROWS)
    ids, log_expected = np.asarray(drawn.ids), np.asarray(drawn.log_expected_counts)
    kept = np.isfinite(log_expected)
    included = np.zeros((ROWS, VOCAB), bool)
    included[np.repeat(np.arange(ROWS), num_samples)[kept.ravel()], ids[kept]] = True
    stated = 1 - (1 - probs) ** num_samples
    np.testing.assert_allclose(np.exp(log_expected[kept]), stated[ids[kept]], rtol=1e-5)
    # Each id's inclusion is a Bernoulli(stated) per row: within 5 standard errors.
    standard_error = np.sqrt(stated * (1 - stated) / ROWS)
    assert np.all(np.abs(included.mean(axis=0) - stated) < 5 * standard_error)


def test_unique_sampling_keeps_one_finite_slot_per_distinct_id_and_gives_repeats_plus_inf():
    drawn = samplers.log_uniform(VOCAB).sample(jax.random.key(0), 8, unique=True, num_rows=50)
    ids, log_expected = np.asarray(drawn.ids), np.asarray(drawn.log_expected_counts)
    kept = np.isfinite(log_expected)
    for row_ids, row_kept in zip(ids, kept):
        assert sorted(row_ids[row_kept]) == sorted(set(row_ids))
    # +inf, not -inf or nan: a repeat's corrected logit s - log E[count] is then -inf, no mass.
    assert (~kept).any() and np.all(log_expected[~kept] == np.inf)


def test_shared_samples_have_shape_k_and_per_row_samples_shape_n_k():
    sampler = samplers.uniform(VOCAB)
    assert sampler.sample(jax.random.key(0), 3).ids.shape == (3,)
    per_row = sampler.sample(jax.random.key(0), 3, num_rows=5)
    assert per_row.ids.shape == per_row.log_expected_counts.shape == (5, 3)


@pytest.mark.parametrize("unique", [False, True])
@pytest.mark.parametrize("num_samples", [0, -2, 1.5])
def test_sample_rejects_k_that_is_not_a_positive_int(num_samples, unique):
    with pytest.raises(ValueError, match="num_samples must be an int >= 1"):
        samplers.uniform(VOCAB).sample(jax.random.key(0), num_samples, unique=unique)


@pytest.mark.parametrize("num_samples", [VOCAB, VOCAB + 1, 3 * VOCAB])
def test_draws_with_replacement_allow_k_at_or_above_the_vocabulary_size(num_samples):
    sampler, probs = all_samplers()["unigram"]
    drawn = sampler.sample(jax.random.key(4), num_samples)
    assert drawn.ids.shape == (num_samples,)
    expected = np.log(num_samples * probs[np.asarray(drawn.ids)])
    np.testing.assert_allclose(drawn.log_expected_counts, expected, rtol=1e-5)
    targets = sampler.log_expected_count(np.arange(VOCAB), num_samples)
    np.testing.assert_allclose(targets, np.log(num_samples * probs), rtol=1e-5)


def test_unique_draws_allow_k_up_to_the_vocabulary_size_and_refuse_more():
    sampler = samplers.uniform(VOCAB)
    drawn = sampler.sample(jax.random.key(0), VOCAB, unique=True)
    kept = np.isfinite(np.asarray(drawn.log_expected_counts))
    assert len(set(np.asarray(drawn.ids)[kept])) == kept.sum()
    refusals = (
        lambda: sampler.sample(jax.random.key(0), VOCAB + 1, unique=True),
        lambda: sampler.log_expected_count(np.arange(3), VOCAB + 1, unique=True),
    )
    for refused in refusals:
        with pytest.raises(ValueError, match=r"num_samples must be <= vocab_size=10 for unique=True draws.*got 11"):
            refused()


@pytest.mark.parametrize("counts", [[3, 0, 1], [3, -1, 1], [3, np.nan, 1]])
def test_unigram_rejects_non_positive_counts(counts):
    with pytest.raises(ValueError, match="counts must be finite and > 0"):
        samplers.unigram(np.array(counts, float))


def test_unigram_rejects_negative_power():
    with pytest.raises(ValueError, match=r"power must be a finite number in \[0.0, inf\), got -0.5"):
        samplers.unigram(COUNTS, power=-0.5)


def test_log_prob_rejects_ids_outside_vocabulary():
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\)"):
        samplers.uniform(VOCAB).log_prob(np.array([0, 10]))


def test_require_frequency_sorted_names_the_first_rise_after_the_specials():
    samplers.require_frequency_sorted([0, 9, 0, 0, 7, 7, 3], num_leading=4)
    with pytest.raises(ValueError, match=r"counts\[5\]=3 < counts\[6\]=4"):
        samplers.require_frequency_sorted([0, 9, 0, 0, 7, 3, 4], num_leading=4)
