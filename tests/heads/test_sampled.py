"""Sampled softmax, NCE and negative sampling against the equations and the full softmax."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import softmax_problems

from seqjax.heads import (
    NegativeSampling,
    full_softmax_loss,
    nce_loss,
    negative_sampling_loss,
    sampled_softmax_loss,
    samplers,
)

random_problem = functools.partial(softmax_problems.random_problem, rows=6, features=4, vocab=10)


def relative_error(got, expected):
    return float(np.linalg.norm(np.asarray(got) - expected) / np.linalg.norm(expected))


def full_gradients(hidden, weights, biases, targets):
    return jax.grad(lambda h, w: full_softmax_loss(h, w, biases, targets).sum(), argnums=(0, 1))(hidden, weights)


def test_sampled_softmax_equals_full_softmax_when_samples_cover_vocab():
    hidden, weights, biases, targets = random_problem(0)
    vocab = weights.shape[0]
    samples = np.arange(vocab, dtype=np.int32)
    log_k_q = np.zeros(vocab, np.float32)  # uniform q = 1/V, K = V: log K·q = 0
    losses = sampled_softmax_loss(hidden, weights, biases, targets, samples, log_k_q, np.zeros(len(targets)))
    np.testing.assert_allclose(losses, full_softmax_loss(hidden, weights, biases, targets), rtol=1e-5)


def test_sampled_softmax_equals_the_corrected_softmax_equation_with_varying_log_expected_counts():
    hidden, weights, biases, _ = random_problem(12)
    targets = np.array([0, 2, 3, 5, 7, 8], np.int32)  # none among the samples: no accidental hits
    samples = np.array([1, 4, 6, 9], np.int32)
    sample_log_counts = np.log([0.3, 0.8, 1.7, 2.4])
    target_log_counts = np.log([0.2, 0.5, 0.9, 1.4, 2.0, 3.1])  # distinct and non-zero
    scores = hidden.astype(np.float64) @ weights.T + biases
    # Softmax over the corrected scores s(c) − log(K q(c)) of the target and the K samples.
    target = scores[np.arange(len(targets)), targets] - target_log_counts
    negatives = scores[:, samples] - sample_log_counts
    expected = np.log(np.exp(target) + np.exp(negatives).sum(axis=1)) - target
    got = sampled_softmax_loss(hidden, weights, biases, targets, samples, sample_log_counts, target_log_counts)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_sampled_softmax_gradient_converges_to_full_softmax_gradient_as_k_grows():
    # With replacement and the true class kept among the samples, Σ_k exp(s_k) / (K q_k) is an
    # unbiased estimate of the partition function, so the gradient is consistent in K.
    hidden, weights, biases, targets = random_problem(1)
    vocab = weights.shape[0]
    expected = full_gradients(hidden, weights, biases, targets)
    errors = []
    for num_samples in (20, 20000):
        samples = jax.random.randint(jax.random.key(num_samples), (num_samples,), 0, vocab)
        log_k_q = jnp.full((num_samples,), np.log(num_samples / vocab))
        target_log_k_q = jnp.full(targets.shape, np.log(num_samples / vocab))
        grads = jax.jit(
            jax.grad(
                lambda h, w, samples=samples, log_k_q=log_k_q, target_log_k_q=target_log_k_q: sampled_softmax_loss(
                    h, w, biases, targets, samples, log_k_q, target_log_k_q, remove_accidental_hits=False
                ).sum(),
                argnums=(0, 1),
            )
        )(hidden, weights)
        errors.append(max(relative_error(g, e) for g, e in zip(grads, expected)))
    assert errors[-1] < 0.05 and errors[-1] < errors[0], errors


def test_sampled_softmax_gives_accidental_hits_no_mass():
    hidden, weights, biases, _ = random_problem(2, rows=1)
    targets = np.array([3], np.int32)
    with_hit = np.array([3, 5, 7], np.int32)
    without_hit = np.array([5, 7], np.int32)
    losses = [
        sampled_softmax_loss(hidden, weights, biases, targets, s, np.zeros(len(s)), np.zeros(1))
        for s in (with_hit, without_hit)
    ]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)


def test_sampled_softmax_with_every_sample_dropped_is_zero_with_zero_finite_gradients():
    """Only the target left in the softmax: the loss is log 1 = 0 and nothing moves (no NaN from
    a normalizer over no finite score)."""
    hidden, weights, biases, targets = random_problem(4)
    samples = np.array([1, 2, 4], np.int32)

    def total(hidden, weights, biases):
        return sampled_softmax_loss(
            hidden, weights, biases, targets, samples, np.full(3, np.inf, np.float32), np.zeros(len(targets))
        ).sum()

    value, grads = jax.value_and_grad(total, argnums=(0, 1, 2))(hidden, weights, biases)
    assert value == 0.0
    for grad in grads:
        np.testing.assert_array_equal(grad, np.zeros_like(grad))


def test_sampled_softmax_ignores_slots_with_infinite_log_expected_count():
    hidden, weights, biases, targets = random_problem(3)
    samples = np.array([1, 2, 2, 4], np.int32)
    dropped = sampled_softmax_loss(
        hidden, weights, biases, targets, samples, np.array([0.0, 0.0, np.inf, 0.0]), np.zeros(len(targets))
    )
    kept = sampled_softmax_loss(
        hidden, weights, biases, targets, samples[[0, 1, 3]], np.zeros(3), np.zeros(len(targets))
    )
    np.testing.assert_allclose(dropped, kept, rtol=1e-6)


def test_per_row_samples_equal_shared_samples_when_every_row_draws_the_same():
    hidden, weights, biases, targets = random_problem(4)
    samples, log_counts = np.array([0, 5, 9], np.int32), np.array([0.1, -0.2, 0.3], np.float32)
    rows = len(targets)
    for loss in (sampled_softmax_loss, nce_loss):
        shared = loss(hidden, weights, biases, targets, samples, log_counts, np.zeros(rows))
        per_row = loss(
            hidden,
            weights,
            biases,
            targets,
            np.tile(samples, (rows, 1)),
            np.tile(log_counts, (rows, 1)),
            np.zeros(rows),
        )
        np.testing.assert_allclose(shared, per_row, rtol=1e-6)


def test_nce_loss_equals_logistic_equations():
    hidden, weights, biases, targets = random_problem(5)
    samples = np.array([1, 1, 6], np.int32)
    sample_log_counts, target_log_counts = np.log([0.3, 0.3, 0.2]), np.log(np.linspace(0.1, 0.6, len(targets)))
    log_z = 0.7
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    scores = hidden.astype(np.float64) @ weights.T + biases
    true_delta = scores[np.arange(len(targets)), targets] - log_z - target_log_counts
    noise_delta = scores[:, samples] - log_z - sample_log_counts
    expected = -np.log(sigmoid(true_delta)) - np.log(1 - sigmoid(noise_delta)).sum(axis=1)
    got = nce_loss(
        hidden, weights, biases, targets, samples, sample_log_counts, target_log_counts, log_normalizer=log_z
    )
    np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize("kind", ["nce", "negative"])
def test_logistic_losses_have_autodiffs_gradients_at_saturated_and_dropped_scores(kind):
    hidden, weights, biases, targets = random_problem(8)
    hidden = hidden * 40.0  # scores of about ±100: σ saturates in both directions
    samples = np.array([1, 4, 6, 9], np.int32)
    sample_log_counts = np.array([0.5, np.inf, -1.0, 0.0], np.float32)  # +inf drops the second slot
    target_log_counts = np.zeros(len(targets), np.float32)

    def loss(hidden, weights, biases):
        if kind == "negative":
            return negative_sampling_loss(hidden, weights, biases, targets, samples).sum()
        return nce_loss(hidden, weights, biases, targets, samples, sample_log_counts, target_log_counts).sum()

    def reference(hidden, weights, biases):  # the equations through jax.nn.softplus
        scores = hidden @ weights.T + biases
        corrections = (0.0, 0.0) if kind == "negative" else (target_log_counts, sample_log_counts)
        true = scores[jnp.arange(len(targets)), targets] - corrections[0]
        noise = scores[:, samples] - corrections[1]
        return (jax.nn.softplus(-true) + jax.nn.softplus(noise).sum(axis=1)).sum()

    value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2))(hidden, weights, biases)
    expected, expected_grads = jax.value_and_grad(reference, argnums=(0, 1, 2))(hidden, weights, biases)
    assert np.abs(hidden @ weights.T).max() > 50.0
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    for got, want in zip(grads, expected_grads):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("remove_accidental_hits", [False, True])
def test_nce_loss_drops_the_noise_term_of_a_sample_equal_to_the_target_only_when_asked(remove_accidental_hits):
    hidden, weights, biases, _ = random_problem(10, rows=3)
    targets = np.array([1, 6, 4], np.int32)  # rows 0 and 1 hit a sample, row 2 does not
    samples = np.array([[1, 3], [6, 6], [0, 9]], np.int32)
    sample_log_counts = np.log([[0.5, 0.2], [0.4, 0.4], [0.3, 0.1]])
    target_log_counts = np.log([0.5, 0.4, 0.2])
    scores = hidden.astype(np.float64) @ weights.T + biases
    rows = np.arange(3)
    # −log σ(Δ) = log(1 + e^{−Δ}) for the target; −log(1 − σ(Δ)) = log(1 + e^{Δ}) per noise sample.
    true_term = np.log1p(np.exp(-(scores[rows, targets] - target_log_counts)))
    noise_terms = np.log1p(np.exp(np.take_along_axis(scores, samples, axis=1) - sample_log_counts))
    if remove_accidental_hits:
        noise_terms[samples == targets[:, None]] = 0.0
    got = nce_loss(
        hidden,
        weights,
        biases,
        targets,
        samples,
        sample_log_counts,
        target_log_counts,
        remove_accidental_hits=remove_accidental_hits,
    )
    np.testing.assert_allclose(got, true_term + noise_terms.sum(axis=1), rtol=1e-5)
    if not remove_accidental_hits:  # TensorFlow's default
        default = nce_loss(hidden, weights, biases, targets, samples, sample_log_counts, target_log_counts)
        np.testing.assert_allclose(default, got, rtol=1e-6)


@pytest.mark.parametrize("loss", [sampled_softmax_loss, nce_loss])
@pytest.mark.parametrize("missing", ["sample_log_expected_counts", "target_log_expected_counts"])
def test_sampling_losses_refuse_a_missing_log_expected_count_by_name(loss, missing):
    hidden, weights, biases, targets = random_problem(11)
    args = {
        "hidden": hidden,
        "weights": weights,
        "biases": biases,
        "targets": targets,
        "samples": np.array([1, 2], np.int32),
        "sample_log_expected_counts": np.zeros(2),
        "target_log_expected_counts": np.zeros(len(targets)),
    }
    args[missing] = None
    with pytest.raises(ValueError, match=f"{missing} must be an array of log expected counts.*got None"):
        loss(**args)
    with pytest.raises(ValueError, match=f"{missing} must be"):  # positionally and under jit alike
        jax.jit(loss)(*args.values())


def test_nce_gradient_approaches_log_likelihood_gradient_for_self_normalized_model():
    hidden, weights, biases, targets = random_problem(6)
    vocab = weights.shape[0]
    # A last feature of 1 in every word vector and −logsumexp(rest) in every hidden row makes
    # Σ_c exp(s_c) = 1 per row: the model is self-normalized (log Z = 0).
    weights[:, -1] = 1.0
    hidden[:, -1] = 0.0
    scores = hidden.astype(np.float64) @ weights.T + biases
    hidden[:, -1] = -np.log(np.exp(scores).sum(axis=1))
    expected = full_gradients(hidden, weights, biases, targets)
    num_samples = 20000
    samples = jax.random.randint(jax.random.key(0), (num_samples,), 0, vocab)
    log_k_q = jnp.full((num_samples,), np.log(num_samples / vocab))
    target_log_k_q = jnp.full(targets.shape, np.log(num_samples / vocab))
    grads = jax.jit(
        jax.grad(
            lambda h, w: nce_loss(h, w, biases, targets, samples, log_k_q, target_log_k_q).sum(),
            argnums=(0, 1),
        )
    )(hidden, weights)
    for got, want in zip(grads, expected):
        assert relative_error(got, want) < 0.05, relative_error(got, want)


def test_negative_sampling_loss_equals_word2vec_objective():
    hidden, weights, biases, targets = random_problem(7)
    samples = np.array([[1, 2], [3, 3], [0, 9], [4, 5], [6, 7], [8, 8]], np.int32)
    log_sigmoid = lambda x: -np.log1p(np.exp(-x))  # noqa: E731
    scores = hidden.astype(np.float64) @ weights.T
    positive = log_sigmoid(scores[np.arange(len(targets)), targets])
    negative = log_sigmoid(-np.take_along_axis(scores, samples, axis=1)).sum(axis=1)
    got = negative_sampling_loss(hidden, weights, None, targets, samples)
    np.testing.assert_allclose(got, -(positive + negative), rtol=1e-5)


def test_negative_sampling_gradient_mean_is_the_exact_gradient_and_vanishes_at_the_shifted_pmi():
    vocab, num_samples, num_keys = 6, 3, 20000
    counts = np.array([30, 12, 9, 5, 3, 1])
    q = counts**0.75 / np.sum(counts**0.75)
    p = np.array([0.05, 0.3, 0.1, 0.25, 0.2, 0.1])  # the next word's distribution in one context
    head = NegativeSampling(vocab, sampler=samplers.unigram(counts, power=0.75), num_samples=num_samples)
    # Zero word vectors, so word w scores its bias s_w; row t has target t and mask weight p_t:
    # the loss is E_{t ~ p}[−log σ(s_t)] + Σ_k −log σ(−s_{w_k}) with w_k drawn from q.
    hidden, targets = np.zeros((vocab, 2), np.float32), np.arange(vocab, dtype=np.int32)

    def loss(biases, key):
        params = {"weights": jnp.zeros((vocab, 2)), "biases": biases}
        return head.apply({"params": params}, hidden, targets, key, p.astype(np.float32), method="loss")[0]

    optimum = np.log(p / (num_samples * q))  # the docstring's optimum s_w = log p_w − log(K q_w)
    elsewhere = np.random.default_rng(0).normal(size=vocab)
    per_key = jax.jit(jax.vmap(jax.vmap(jax.grad(loss), in_axes=(None, 0)), in_axes=(0, None)))
    grads = np.asarray(
        per_key(np.stack([optimum, elsewhere]).astype(np.float32), jax.random.split(jax.random.key(0), num_keys))
    )
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    for biases, got in zip((optimum, elsewhere), grads):
        # ∂/∂s_w of the expected loss: −p_w σ(−s_w) + K q_w σ(s_w), zero at the optimum.
        exact = -p * sigmoid(-biases) + num_samples * q * sigmoid(biases)
        standard_error = got.std(axis=0, ddof=1) / np.sqrt(num_keys)
        np.testing.assert_array_less(np.abs(got.mean(axis=0) - exact), 5 * standard_error + 1e-6)


def test_sampled_losses_are_jittable_with_traced_samples():
    hidden, weights, biases, targets = random_problem(8)
    samples, log_counts = np.array([2, 4], np.int32), np.zeros(2, np.float32)
    args = (hidden, weights, biases, targets, samples, log_counts, np.zeros(len(targets)))
    eager = sampled_softmax_loss(*args)
    jitted = jax.jit(sampled_softmax_loss)(*args)
    np.testing.assert_allclose(eager, jitted, rtol=1e-6)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(samples=np.array([0, 10], np.int32)), r"samples must lie in \[0, 10\)"),
        (dict(samples=np.zeros((2, 3), np.int32)), r"samples must have shape \[K\] or \[N=6, K\]"),
        (dict(samples=np.zeros((0,), np.int32), sample_log_expected_counts=np.zeros(0)), "samples must hold K > 0 ids"),
        (dict(sample_log_expected_counts=np.zeros(3)), "sample_log_expected_counts must have the shape of samples"),
        (dict(target_log_expected_counts=np.zeros(5)), r"target_log_expected_counts must have shape \[N=6\]"),
        (dict(targets=np.full(6, 11, np.int32)), r"targets must lie in \[0, 10\)"),
    ],
)
def test_sampled_softmax_rejects_bad_input_on_the_host(change, message):
    hidden, weights, biases, targets = random_problem(9)
    args = dict(
        hidden=hidden,
        weights=weights,
        biases=biases,
        targets=targets,
        samples=np.array([1, 2], np.int32),
        sample_log_expected_counts=np.zeros(2),
        target_log_expected_counts=np.zeros(6),
    )
    args.update(change)
    with pytest.raises(ValueError, match=message):
        sampled_softmax_loss(**args)
