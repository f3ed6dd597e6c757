"""Minimum-risk training: the risk formula, distinct candidates, the exact risk over beam
candidates, and a toy problem it improves."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sacrebleu
from objective_toys import all_sequences, expected_reward_fn, reference_batch, tiny

from seqjax.contracts import SPECIAL_IDS, SpecialIds
from seqjax.data import EOS_ID
from seqjax.objectives import MinimumRisk
from seqjax.objectives.minimum_risk import expected_risk, first_occurrences
from seqjax.objectives.sequences import candidate_log_probs, lengths_after, truncate

VOCAB, LENGTH = 6, 3
REFERENCE = (4, 5)


def test_expected_risk_uses_the_sharpened_distribution_renormalized_over_available_candidates():
    log_probs = np.array([[-1.0, -2.0, -0.5], [-3.0, -1.0, -2.0]], np.float32)
    costs = np.array([[0.2, 0.9, 0.5], [1.0, 0.0, 0.4]], np.float32)
    available = np.array([[True, True, False], [True, True, True]])
    alpha = 0.7
    weights = np.where(available, np.exp(alpha * log_probs), 0.0)
    expected = (weights / weights.sum(axis=1, keepdims=True) * costs).sum(axis=1)
    np.testing.assert_allclose(expected_risk(log_probs, costs, available, alpha=alpha), expected, rtol=1e-6)


def test_repeated_and_missing_candidates_are_not_available():
    candidates = jnp.asarray(
        [
            [[4, 2, 0], [5, 2, 0], [4, 2, 0], [5, 2, 0]],
            [[0, 0, 0], [4, 2, 0], [0, 0, 0], [4, 2, 0]],
        ]
    )
    present = jnp.asarray([[True, True, True, True], [False, True, True, True]])
    np.testing.assert_array_equal(
        first_occurrences(candidates, present), [[True, True, False, False], [False, True, True, False]]
    )


@pytest.mark.slow
@pytest.mark.parametrize("num_candidates", [25, 216])
def test_beam_risk_is_the_sharpened_expected_cost_over_the_n_most_probable_sequences(num_candidates):
    row = reference_batch(REFERENCE, LENGTH)
    model, head, params = tiny("rnn", vocab=VOCAB, d_model=4, batch=row, seed=2)
    strings = all_sequences(VOCAB, LENGTH)
    repeated = jax.tree.map(lambda x: jnp.repeat(x, len(strings), axis=0), row)
    string_probs = np.exp(np.asarray(candidate_log_probs(model, head, params, repeated, strings), np.float64).sum(1))
    # A sequence (ended by its first EOS) has the probability of all the strings it begins:
    # 1 + 5 + 5·5·6 = 156 sequences. A beam of n >= 25 (the live prefixes after two steps) is exact.
    probability = {}
    for string, string_prob in zip(np.asarray(strings).tolist(), string_probs):
        sequence = tuple(string[: string.index(EOS_ID) + 1] if EOS_ID in string else string)
        probability[sequence] = probability.get(sequence, 0.0) + string_prob
    assert len(probability) == 156
    best = sorted(probability, key=probability.get, reverse=True)[:num_candidates]
    p = np.array([probability[y] for y in best])
    words = [" ".join(str(t) for t in y if t != EOS_ID) for y in best]
    bleu = np.array([sacrebleu.sentence_bleu(w, ["4 5"], tokenize="none").score for w in words])
    alpha = 0.5
    q = p**alpha / np.sum(p**alpha)
    want = np.sum(q * (1.0 - bleu / 100.0))

    objective = MinimumRisk(num_candidates=num_candidates, search="beam", alpha=alpha)
    call = jax.jit(lambda params: objective(model, head, params, row, jax.random.key(0), jnp.int32(0), ids=SPECIAL_IDS))
    risk, metrics = call(params)
    np.testing.assert_allclose(risk, want, rtol=1e-5)
    np.testing.assert_allclose(metrics["distinct"], len(best) / num_candidates, rtol=1e-6)


def test_minimum_risk_training_lowers_the_exact_expected_risk_on_a_toy_problem():
    batch = reference_batch(REFERENCE, LENGTH, rows=8)
    model, head, params = tiny("rnn", vocab=VOCAB, d_model=4, batch=batch, seed=4)
    expected_reward = expected_reward_fn(model, head, reference_batch(REFERENCE, LENGTH), VOCAB, LENGTH)

    objective = MinimumRisk(num_candidates=8, alpha=1.0)

    def descend(params, key):
        grads, metrics = jax.grad(
            lambda p: objective(model, head, p, batch, key, jnp.int32(0), ids=SPECIAL_IDS), has_aux=True
        )(params)
        return jax.tree.map(lambda p, g: p - 2.0 * g, params, grads), metrics["risk"]

    @jax.jit
    def train(params):
        trained, risks = jax.lax.scan(descend, params, jax.random.split(jax.random.key(0), 40))
        return 1.0 - expected_reward(params), 1.0 - expected_reward(trained), risks

    before, after, risks = train(params)
    assert after < before - 0.1, (before, after)
    assert np.mean(risks[-10:]) < np.mean(risks[:10])


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(search="nbest"), "search must be one of"),
        (dict(alpha=0.0), "alpha must be a finite number in \\(0.0, inf\\)"),
        (dict(num_candidates=0), "num_candidates must be an int >= 1"),
    ],
)
def test_bad_options_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        MinimumRisk(**options)


def test_candidate_lengths_and_padding_follow_the_given_special_ids():
    ids = SpecialIds(pad=9, bos=1, eos=5, unk=3)
    tokens = jnp.asarray([[4, 5, 6], [6, 6, 6], [2, 0, 5]])
    lengths = lengths_after(tokens, ids=ids)
    np.testing.assert_array_equal(lengths, [2, 3, 3])
    np.testing.assert_array_equal(truncate(tokens, lengths, ids=ids), [[4, 5, 9], [6, 6, 6], [2, 0, 5]])
