"""The oracle task: a fixed random LSTM, its samples, and its exact likelihood."""

import itertools

import numpy as np
import pytest

from seqjax.config import DataConfig
from seqjax.data import EOS_ID, SPECIAL_TOKENS, LMData, load_data
from seqjax.data.synthetic.oracle import (
    LENGTH,
    VOCAB_SIZE,
    make_oracle,
    oracle_ids,
    oracle_lines,
    oracle_nll,
    oracle_sample,
    oracle_tokenizer,
)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reference_log_prob(oracle, sequence) -> float:
    """log p(sequence) from the LSTM equations, one token at a time, in float64."""
    E = oracle.embedding.astype(np.float64)
    W, b = oracle.kernel.astype(np.float64), oracle.bias.astype(np.float64)
    H = W.shape[1] // 4
    c, h = np.zeros(H), np.zeros(H)
    previous, total = oracle.vocab_size, 0.0
    for token in sequence:
        z = np.concatenate([E[previous], h]) @ W + b
        i, f, g, o = np.split(z, 4)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        logits = h @ oracle.output.astype(np.float64) + oracle.output_bias
        total += logits[token] - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        previous = token
    return total


def test_oracle_and_its_samples_depend_only_on_the_seeds():
    first, second = make_oracle(vocab_size=30, width=4, length=5), make_oracle(vocab_size=30, width=4, length=5)
    np.testing.assert_array_equal(first.output, second.output)
    np.testing.assert_array_equal(oracle_sample(first, 50, (1, 0)), oracle_sample(second, 50, (1, 0)))
    assert not np.array_equal(oracle_sample(first, 50, (1, 0)), oracle_sample(first, 50, (1, 1)))
    assert not np.array_equal(first.output, make_oracle(seed=5, vocab_size=30, width=4, length=5).output)


def test_nll_is_the_per_token_log_likelihood_of_the_lstm_equations():
    oracle = make_oracle(vocab_size=12, width=6, length=4)
    tokens = np.random.default_rng(0).integers(0, 12, size=(5, 4))
    lengths = np.array([4, 1, 2, 3, 4])
    expected = [-reference_log_prob(oracle, row[:n]) / n for row, n in zip(tokens, lengths)]
    np.testing.assert_allclose(oracle_nll(oracle, tokens, lengths), expected, rtol=1e-5)


def test_probabilities_of_all_sequences_sum_to_one():
    oracle = make_oracle(vocab_size=4, width=3, length=3)
    every = np.array(list(itertools.product(range(4), repeat=3)))
    np.testing.assert_allclose(np.exp(-3 * oracle_nll(oracle, every)).sum(), 1.0, rtol=1e-5)


def test_sample_frequencies_follow_the_oracle_probabilities():
    oracle = make_oracle(vocab_size=3, width=3, length=2)
    samples = oracle_sample(oracle, 20000, 7)
    every = np.array(list(itertools.product(range(3), repeat=2)))
    probabilities = np.exp(-2 * oracle_nll(oracle, every))
    counts = np.bincount(samples[:, 0] * 3 + samples[:, 1], minlength=9)
    expected = probabilities * len(samples)
    assert ((counts - expected) ** 2 / expected).sum() < 26.1  # 99.9% quantile, 8 degrees of freedom


def test_oracle_tokens_round_trip_through_the_word_vocabulary():
    oracle = make_oracle(vocab_size=40, width=4, length=6)
    samples = oracle_sample(oracle, 30, 0)
    tokenizer = oracle_tokenizer(oracle, oracle_lines(samples[:10]))
    assert tokenizer.vocab.size == len(SPECIAL_TOKENS) + 40
    ids = np.array(tokenizer.encode_batch(oracle_lines(samples)))
    np.testing.assert_array_equal(oracle_ids(tokenizer.vocab)[ids], samples)
    assert (oracle_ids(tokenizer.vocab)[: len(SPECIAL_TOKENS)] == -1).all()


def test_oracle_task_is_an_lm_corpus_of_fixed_length_lines():
    data = load_data(DataConfig(kind="synthetic", task="oracle", num_train=30, num_eval=5, seed=2))
    assert isinstance(data, LMData) and data.tokenizer.vocab.size == len(SPECIAL_TOKENS) + VOCAB_SIZE
    train = data.splits["train"].reshape(30, LENGTH + 1)
    assert (train[:, -1] == EOS_ID).all() and (train[:, :-1] != EOS_ID).all()
    expected = oracle_sample(make_oracle(), 30, (2, 0))  # the train split is (seed, 0)
    np.testing.assert_array_equal(oracle_ids(data.tokenizer.vocab)[train[:, :-1]], expected)


@pytest.mark.parametrize(
    "tokens, lengths, message",
    [
        (np.array([[0, 9]]), None, "tokens must be oracle ids in \\[0, 5\\)"),
        (np.zeros((1, 7), int), None, "tokens length must be in \\[1, oracle.length=3\\]"),
        (np.zeros((2, 2), int), np.array([0, 2]), "lengths must be"),
        (np.zeros(3, int), None, "tokens must be a \\[N, L\\] integer array"),
    ],
)
def test_nll_rejects_ids_and_lengths_outside_the_oracle(tokens, lengths, message):
    with pytest.raises(ValueError, match=message):
        oracle_nll(make_oracle(vocab_size=5, width=2, length=3), tokens, lengths)
