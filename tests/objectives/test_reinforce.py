"""REINFORCE and MIXER: the estimator's mean is the exact gradient of the expected reward."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from objective_toys import expected_reward_fn, mixer_objective_fn, reference_batch, tiny

from seqjax.contracts import SPECIAL_IDS
from seqjax.objectives import MinimumRisk, Mixer, Reinforce, TeacherForcing
from seqjax.objectives.reinforce import leave_one_out_mean, mixer_delta, reinforce_surrogate

VOCAB, LENGTH = 6, 3  # ids 4 and 5 are words; 6^3 strings to enumerate
REFERENCE = (4, 5)


@pytest.mark.slow
@pytest.mark.parametrize("baseline", ["none", "self_critical"])
def test_estimator_mean_is_the_exact_gradient_of_the_expected_bleu(baseline):
    row = reference_batch(REFERENCE, LENGTH)
    model, head, params = tiny("rnn", vocab=VOCAB, d_model=4, batch=row, seed=1)
    exact = jax.jit(jax.grad(expected_reward_fn(model, head, row, VOCAB, LENGTH)))(params)
    batch = reference_batch(REFERENCE, LENGTH, rows=16)
    objective = functools.partial(Reinforce(sequences_per_source=4, baseline=baseline), model, head, ids=SPECIAL_IDS)

    @jax.jit
    def estimates(keys):
        return jax.vmap(lambda key: jax.grad(lambda p: objective(p, batch, key, jnp.int32(0))[0])(params))(keys)

    groups = estimates(jax.random.split(jax.random.key(2), 64))  # 64 independent means of 64 samples
    # The objective is minimized: its gradient is −∇E[r].
    assert_mean_within_standard_errors(jax.tree.map(lambda g: -g, groups), exact)


def assert_mean_within_standard_errors(groups, exact, *, sigmas=5.0):
    """The mean over axis 0 of each leaf of `groups` is within `sigmas` standard errors of `exact`."""
    for want, got in zip(jax.tree.leaves(exact), jax.tree.leaves(groups)):
        got, want = np.asarray(got), np.asarray(want)
        standard_error = got.std(axis=0, ddof=1) / np.sqrt(len(got))
        tolerance = sigmas * standard_error + 1e-5 * (1 + np.abs(want))
        np.testing.assert_array_less(np.abs(got.mean(axis=0) - want), tolerance)


@pytest.mark.slow
def test_mixer_gradient_mean_is_prefix_cross_entropy_plus_exact_reinforce_of_the_last_delta_tokens():
    # L = 3 targets (4, 5, EOS) and Δ = 2: cross-entropy on the gold 4, REINFORCE on the 6² continuations.
    # The leave-one-out baseline leaves the mean unbiased (the mean of both samples would halve
    # the REINFORCE term).
    row = reference_batch(REFERENCE, LENGTH)
    model, head, params = tiny("rnn", vocab=VOCAB, d_model=4, batch=row, seed=1)
    exact = jax.jit(jax.grad(mixer_objective_fn(model, head, row, VOCAB, LENGTH, prefix=1)))(params)
    batch = reference_batch(REFERENCE, LENGTH, rows=32)
    mixer = Mixer(sequences_per_source=2, baseline="mean", delta_start=2, delta_growth=0)
    objective = functools.partial(mixer, model, head, ids=SPECIAL_IDS)

    @jax.jit
    def estimates(keys):
        return jax.vmap(lambda key: jax.grad(lambda p: objective(p, batch, key, jnp.int32(0))[0])(params))(keys)

    assert_mean_within_standard_errors(estimates(jax.random.split(jax.random.key(3), 64)), exact)


@pytest.mark.parametrize(
    "objective",
    [
        Mixer(sequences_per_source=2, delta_start=2, delta_growth=0, mle_weight=0.3),
        MinimumRisk(num_candidates=3, mle_weight=0.3),
    ],
    ids=["mixer", "minimum_risk"],
)
def test_mle_weight_mixes_teacher_forcing_with_the_sequence_loss_of_the_same_key(objective):
    batch = reference_batch(REFERENCE, LENGTH, rows=2)
    model, head, params = tiny("rnn", vocab=VOCAB, d_model=4, batch=batch)
    without_mle = dataclasses.replace(objective, mle_weight=0.0)

    @jax.jit
    def losses(params, key):
        step = jnp.int32(0)
        mixed, metrics = objective(model, head, params, batch, key, step, ids=SPECIAL_IDS)
        sequence_loss, _ = without_mle(model, head, params, batch, key, step, ids=SPECIAL_IDS)
        teacher_forcing, _ = TeacherForcing()(model, head, params, batch, key, step, ids=SPECIAL_IDS)
        return mixed, metrics["mle_loss"], sequence_loss, teacher_forcing

    mixed, mle_loss, sequence_loss, teacher_forcing = losses(params, jax.random.key(4))
    np.testing.assert_allclose(mixed, 0.3 * teacher_forcing + 0.7 * sequence_loss, rtol=1e-6)
    np.testing.assert_allclose(mle_loss, teacher_forcing, rtol=1e-6)
    assert abs(float(sequence_loss) - float(teacher_forcing)) > 0.01  # so the weights matter


def test_leave_one_out_mean_averages_the_other_samples():
    rewards = jnp.asarray([[1.0, 2.0, 6.0], [0.0, 0.0, 3.0]])
    np.testing.assert_allclose(leave_one_out_mean(rewards), [[4.0, 3.5, 1.5], [1.5, 1.5, 0.0]])


def test_surrogate_gradient_is_advantage_times_score_and_ignores_masked_rows():
    log_probs = jnp.asarray([[-1.0, -2.0], [-0.5, -0.1]])
    rewards, baselines = jnp.asarray([[1.0, 0.0], [5.0, 5.0]]), jnp.asarray([[0.25, 0.25], [0.0, 0.0]])
    grad = jax.grad(reinforce_surrogate)(log_probs, rewards, baselines, jnp.asarray([1.0, 0.0]))
    np.testing.assert_allclose(grad, [[-0.75 / 2, 0.25 / 2], [0.0, 0.0]])


def test_mixer_delta_grows_by_steps():
    delta = functools.partial(mixer_delta, delta_start=2, delta_growth=3, delta_every=100)
    assert [int(delta(s)) for s in (0, 99, 100, 250)] == [2, 2, 5, 8]


def test_mixer_with_delta_beyond_the_length_is_reinforce():
    batch = reference_batch(REFERENCE, LENGTH, rows=4)
    model, head, params = tiny("rnn", vocab=VOCAB, d_model=4, batch=batch)
    key, step = jax.random.key(3), jnp.int32(0)

    @jax.jit
    def both(params):
        plain = Reinforce(sequences_per_source=2)(model, head, params, batch, key, step, ids=SPECIAL_IDS)
        mixed = Mixer(sequences_per_source=2, delta_start=LENGTH, delta_growth=0)(
            model, head, params, batch, key, step, ids=SPECIAL_IDS
        )
        return plain, (mixed[0], {k: v for k, v in mixed[1].items() if k != "delta"})

    for a, b in zip(*(jax.tree.leaves(x) for x in both(params))):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: Reinforce(sequences_per_source=1, baseline="mean"), "sequences_per_source must be >= 2"),
        (lambda: Reinforce(baseline="critic"), "baseline must be one of"),
        (lambda: Reinforce(mle_weight=2.0), "mle_weight must be"),
        (lambda: Mixer(delta_every=0), "delta_every must be an int >= 1"),
        (lambda: Mixer(sequences_per_source=0), "sequences_per_source must be an int >= 1"),
    ],
)
def test_bad_options_are_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()
