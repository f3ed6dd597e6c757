"""The VAE LM objective: the Gaussian KL, the reparameterization, the β schedules, word
dropout and free bits against numpy and closed forms, and the loss against the bound."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from objective_toys import initialized_on_random_tokens

from seqjax.config import HeadConfig, ModelConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import build_head
from seqjax.model_head import token_log_probs
from seqjax.models import build_model
from seqjax.models.language_models.vae import RNNVAEOptions
from seqjax.objectives import VAE
from seqjax.objectives.vae import (
    decoder_hidden,
    drop_words,
    free_bits_kl,
    gaussian_kl,
    kl_weight,
    negative_elbo,
    posterior,
    reparameterize,
)

V, B, T, Z = 11, 3, 7, 4


def test_gaussian_kl_equals_the_closed_form_in_numpy():
    rng = np.random.default_rng(0)
    mean, log_variance = rng.normal(size=(2, 5, Z)).astype(np.float32)
    sigma = np.exp(0.5 * log_variance.astype(np.float64))
    # KL(N(μ, σ²) ‖ N(0, 1)) = log(1/σ) + (σ² + μ²) / 2 − 1/2
    want = np.log(1.0 / sigma) + (sigma**2 + mean.astype(np.float64) ** 2) / 2.0 - 0.5
    np.testing.assert_allclose(gaussian_kl(jnp.asarray(mean), jnp.asarray(log_variance)), want, rtol=1e-5, atol=1e-6)


def test_gaussian_kl_matches_a_monte_carlo_estimate_of_log_q_minus_log_p():
    mean, log_variance = jnp.array([0.7, -1.2]), jnp.array([-0.5, 0.8])
    draws = np.asarray(
        reparameterize(
            jnp.broadcast_to(mean, (400_000, 2)), jnp.broadcast_to(log_variance, (400_000, 2)), jax.random.key(2)
        )
    )
    sigma = np.exp(0.5 * np.asarray(log_variance))
    log_q = -0.5 * ((draws - np.asarray(mean)) / sigma) ** 2 - np.log(sigma)
    log_p = -0.5 * draws**2
    samples = log_q - log_p
    error = 4 * samples.std(axis=0) / np.sqrt(len(samples))
    np.testing.assert_array_less(np.abs(samples.mean(axis=0) - np.asarray(gaussian_kl(mean, log_variance))), error)


def test_reparameterized_gradient_matches_finite_differences():
    key = jax.random.key(3)
    mean = jnp.array([[0.3, -0.4, 1.1], [0.0, 0.5, -0.9]])
    log_variance = jnp.array([[-0.2, 0.4, -1.0], [0.6, -0.3, 0.1]])
    weights = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]])
    noise = np.asarray(jax.random.normal(key, mean.shape), np.float64)

    def f(m, lv):  # a smooth function of the sample, float64 in numpy with the same noise
        return float((weights * np.sin(m + np.exp(0.5 * lv) * noise)).sum())

    grad_mean, grad_log_variance = jax.grad(
        lambda m, lv: (weights * jnp.sin(reparameterize(m, lv, key))).sum(), argnums=(0, 1)
    )(mean, log_variance)
    m, lv, h = np.asarray(mean, np.float64), np.asarray(log_variance, np.float64), 1e-5
    for got, argument in ((grad_mean, 0), (grad_log_variance, 1)):
        want = np.zeros(m.shape)
        for index in np.ndindex(m.shape):
            step = np.zeros(m.shape)
            step[index] = h
            args_plus = (m + step, lv) if argument == 0 else (m, lv + step)
            args_minus = (m - step, lv) if argument == 0 else (m, lv - step)
            want[index] = (f(*args_plus) - f(*args_minus)) / (2 * h)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("schedule", ["linear", "sigmoid"])
def test_annealed_kl_weight_is_zero_at_the_start_half_at_the_middle_and_beta_from_the_end(schedule):
    options = dict(beta=0.8, anneal_steps=100, sharpness=10.0)
    weights = [float(kl_weight(schedule, step, **options)) for step in (0, 50, 100, 250)]
    np.testing.assert_allclose(weights, [0.0, 0.4, 0.8, 0.8], atol=1e-6)
    curve = np.asarray(jax.vmap(lambda s: kl_weight(schedule, s, **options))(jnp.arange(101)))
    assert np.all(np.diff(curve) > 0)


def test_sigmoid_weight_follows_the_rescaled_logistic_curve():
    def sigmoid(x):
        return 1 / (1 + np.exp(-x))

    low, high = sigmoid(-2.5), sigmoid(2.5)
    want = 2.0 * (sigmoid(5.0 * (30 / 200 - 0.5)) - low) / (high - low)
    assert float(kl_weight("sigmoid", 30, beta=2.0, anneal_steps=200, sharpness=5.0)) == pytest.approx(want, rel=1e-5)


def test_constant_weight_is_beta_from_the_first_step():
    assert float(kl_weight("constant", 0, beta=0.3, anneal_steps=10, sharpness=1.0)) == pytest.approx(0.3)


def test_word_dropout_replaces_valid_inputs_after_the_first_at_its_rate():
    inputs = jnp.full((200, 50), 7, jnp.int32)
    mask = jnp.ones((200, 50)).at[:, 40:].set(0.0)
    everything = drop_words(inputs, mask, jax.random.key(0), rate=1.0, unk_id=SPECIAL_IDS.unk)
    assert np.all(np.asarray(everything[:, 1:40]) == SPECIAL_IDS.unk)
    assert np.all(np.asarray(everything[:, 0]) == 7) and np.all(np.asarray(everything[:, 40:]) == 7)
    assert np.array_equal(drop_words(inputs, mask, jax.random.key(0), rate=0.0, unk_id=SPECIAL_IDS.unk), inputs)
    some = np.asarray(drop_words(inputs, mask, jax.random.key(1), rate=0.3, unk_id=SPECIAL_IDS.unk))
    dropped, n = (some[:, 1:40] == SPECIAL_IDS.unk).sum(), 200 * 39
    assert abs(dropped - 0.3 * n) < 4 * np.sqrt(n * 0.3 * 0.7)
    assert np.all(some[:, 40:] == 7)


def test_free_bits_floor_each_dimensions_batch_mean_kl():
    kl = jnp.array([[0.1, 2.0, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 0.0]])  # the last row holds no token
    rows = jnp.float32(2.0)
    assert float(free_bits_kl(kl, rows, 0.0)) == pytest.approx(3.4)
    # batch means per dimension 0.2, 1.5, 0.0; floored at 0.5: 0.5 + 1.5 + 0.5, times 2 rows
    assert float(free_bits_kl(kl, rows, 0.5)) == pytest.approx(5.0)
    gradient = jax.grad(lambda k: free_bits_kl(k, rows, 0.5))(kl)
    np.testing.assert_array_equal(gradient, [[0.0, 1.0, 0.0]] * 3)  # dimensions under the floor are free


def test_options_are_checked_when_built():
    for bad in (
        dict(beta=-1.0),
        dict(schedule="cosine"),
        dict(anneal_steps=0),
        dict(word_dropout=1.5),
        dict(free_bits=-0.1),
        dict(sharpness=0.0),
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            VAE(**bad)


@pytest.fixture(scope="module")
def tiny_vae():
    model = build_model(
        ModelConfig(kind="rnn_vae", d_model=8, layers=1, dropout=0.0, groups=(RNNVAEOptions(latent_size=Z),)), V
    )
    head = build_head(HeadConfig(kind="full"), V, np.ones(V))
    mask = jnp.ones((B, T)).at[1, 5:].set(0.0).at[2].set(0.0)  # row 2 is padding, as at an eval split's end
    return initialized_on_random_tokens(model, head, V, mask)


@pytest.mark.slow
def test_negative_elbo_is_the_exact_reconstruction_nll_plus_the_closed_form_kl(tiny_vae):
    model, head, params, batch = tiny_vae
    key = jax.random.key(5)
    terms = jax.jit(lambda p: negative_elbo(model, head, p, batch, key))(params)
    mean, log_variance = (np.asarray(x, np.float64) for x in posterior(model, params, batch))
    z = mean + np.exp(0.5 * log_variance) * np.asarray(jax.random.normal(key, mean.shape))
    log_probs = jax.jit(
        lambda p: token_log_probs(
            model, head, p, decoder_hidden(model, p, batch["inputs"], jnp.asarray(z, jnp.float32), key, train=False)
        )
    )(params)
    log_probs = np.asarray(log_probs)
    targets, mask = np.asarray(batch["targets"]), np.asarray(batch["mask"])
    nll = -np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    kl = (0.5 * (np.exp(log_variance) + mean**2 - 1 - log_variance)).sum(axis=1)
    assert float(terms["nll"]) == pytest.approx((nll * mask).sum(), rel=1e-5)
    assert float(terms["kl"]) == pytest.approx(kl[:2].sum(), rel=1e-5)  # not the padding row's
    assert (float(terms["tokens"]), float(terms["rows"])) == (mask.sum(), 2.0)


def test_loss_at_beta_one_is_the_negative_elbo_per_token(tiny_vae):
    model, head, params, batch = tiny_vae
    key, step = jax.random.key(7), jnp.int32(3)
    objective = VAE(schedule="constant", beta=1.0)
    loss, metrics = jax.jit(lambda p: objective(model, head, p, batch, key, step, ids=SPECIAL_IDS))(params)
    z_key = jax.random.split(key, 4)[0]  # the objective's
    terms = jax.jit(lambda p: negative_elbo(model, head, p, batch, z_key))(params)
    tokens = float(terms["tokens"])
    assert float(loss) == pytest.approx((float(terms["nll"]) + float(terms["kl"])) / tokens, rel=1e-5)
    assert float(metrics["kl"]) == pytest.approx(float(terms["kl"]) / 2, rel=1e-5)
    assert float(metrics["negative_elbo"]) == pytest.approx(float(loss), rel=1e-6)


def test_annealed_loss_weights_the_kl_and_reports_beta(tiny_vae):
    model, head, params, batch = tiny_vae
    objective = dataclasses.replace(VAE(), schedule="linear", anneal_steps=10, beta=1.0)
    key = jax.random.key(7)
    call = jax.jit(lambda p, step: objective(model, head, p, batch, key, step, ids=SPECIAL_IDS))
    start, start_metrics = call(params, jnp.int32(0))
    middle, middle_metrics = call(params, jnp.int32(5))
    assert float(start) == pytest.approx(float(start_metrics["reconstruction"]), rel=1e-6)  # β = 0
    assert float(middle_metrics["kl_weight"]) == pytest.approx(0.5)
    tokens = float(batch["mask"].sum())
    assert float(middle) == pytest.approx(
        float(middle_metrics["reconstruction"]) + 0.5 * 2 * float(middle_metrics["kl"]) / tokens, rel=1e-5
    )


def _masked_nll(model, head, params, batch, z):
    """Σ over unmasked targets of −log p(y_t | y_<t, z), from the head's log-probabilities, in numpy."""
    hidden = decoder_hidden(model, params, batch["inputs"], jnp.asarray(z, jnp.float32), jax.random.key(0), train=False)
    log_probs = np.asarray(token_log_probs(model, head, params, hidden), np.float64)
    targets, mask = np.asarray(batch["targets"]), np.asarray(batch["mask"])
    return -(np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0] * mask).sum()


@pytest.mark.slow
def test_the_reconstruction_gap_is_the_nll_given_a_prior_z_less_the_nll_given_a_posterior_z(tiny_vae):
    model, head, params, batch = tiny_vae
    key = jax.random.key(9)
    posterior_key, prior_key = jax.random.split(key)
    mean, log_variance = (np.asarray(x, np.float64) for x in posterior(model, params, batch))
    z_posterior = mean + np.exp(0.5 * log_variance) * np.asarray(jax.random.normal(posterior_key, mean.shape))
    z_prior = np.asarray(jax.random.normal(prior_key, mean.shape))
    expected_prior = _masked_nll(model, head, params, batch, z_prior)
    expected_gap = expected_prior - _masked_nll(model, head, params, batch, z_posterior)

    bound, _, further = jax.jit(lambda p: VAE().eval_sums(model, head, p, batch, key, ids=SPECIAL_IDS))(params)

    assert float(further["prior_nll"]) == pytest.approx(expected_prior, rel=1e-5)
    gap = float(further["prior_nll"]) - (float(bound) - float(further["kl"]))
    assert gap == pytest.approx(expected_gap, rel=1e-4, abs=1e-4)
