"""The VAE LM's model: decoding given z, the encoder's padding, the latent's checks and
interpolation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import Config, ModelConfig, override
from seqjax.models import build_model
from seqjax.models.language_models.vae import RNNVAEOptions
from seqjax.training.features.interpolation import interpolate_latents

V, B, T, Z = 13, 2, 6, 3
TINY = ModelConfig(kind="rnn_vae", d_model=8, layers=2, dropout=0.0, groups=(RNNVAEOptions(latent_size=Z),))
CONFIGS = {
    "lstm_fed": TINY.with_options(RNNVAEOptions(latent_size=Z, feed_latent=True)),
    "gru_residual": dataclasses.replace(TINY, cell="gru", residual=True),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def vae(request, random_variables):
    model = build_model(CONFIGS[request.param], V)
    tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V)
    return model, random_variables(model, tokens), tokens


def test_decode_steps_equal_the_teacher_forced_pass_given_z(vae):
    model, variables, tokens = vae
    latent = jax.random.normal(jax.random.key(1), (B, Z))
    forced = model.apply(variables, tokens, latent, method="decode")
    state = model.apply(variables, B, T, latent, method="init_decode_state")

    def step(state, token):
        hidden, state = model.apply(variables, state, token, method="decode_step")
        return state, hidden

    _, stepped = jax.lax.scan(step, state, tokens.T)
    np.testing.assert_allclose(jnp.swapaxes(stepped, 0, 1), forced, rtol=1e-5, atol=1e-6)


def test_the_decoder_depends_on_z(vae):
    model, variables, tokens = vae
    first, second = jnp.zeros((B, Z)), jnp.ones((B, Z))
    hidden = [model.apply(variables, tokens, z, method="decode") for z in (first, second)]
    assert np.abs(np.asarray(hidden[0] - hidden[1])).max() > 1e-3


def test_encoder_ignores_tokens_after_the_mask(vae):
    model, variables, tokens = vae
    mask = jnp.arange(T) < jnp.array([[4], [T]])
    changed = tokens.at[0, 4:].set((tokens[0, 4:] + 1) % V)
    for got, want in zip(
        model.apply(variables, changed, mask, method="encode"), model.apply(variables, tokens, mask, method="encode")
    ):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    read, _ = model.apply(variables, changed, method="encode")  # without the mask the change is read
    unchanged, _ = model.apply(variables, tokens, method="encode")
    assert np.abs(np.asarray(read[0] - unchanged[0])).max() > 1e-4


def test_call_decodes_from_the_posterior_mean(vae):
    model, variables, tokens = vae
    mean, _ = model.apply(variables, tokens, method="encode")
    np.testing.assert_allclose(
        model.apply(variables, tokens), model.apply(variables, tokens, mean, method="decode"), rtol=1e-6
    )


def test_decoding_without_a_latent_of_the_right_shape_is_refused(vae):
    model, variables, _ = vae
    with pytest.raises(ValueError, match="latent must be"):
        model.apply(variables, B, T, method="init_decode_state")
    with pytest.raises(ValueError, match=r"\[2, 3\]"):
        model.apply(variables, B, T, jnp.zeros((B, Z + 1)), method="init_decode_state")


def test_a_non_positive_latent_size_is_refused():
    with pytest.raises(ValueError, match="model.rnn_vae.latent_size must be an int >= 1, got 0"):
        override(Config(model=TINY), ["model.rnn_vae.latent_size=0"])


def test_interpolation_runs_evenly_from_the_first_latent_to_the_second():
    first, second = jnp.array([0.0, 2.0]), jnp.array([4.0, -2.0])
    np.testing.assert_allclose(interpolate_latents(first, second, 5), [[0, 2], [1, 1], [2, 0], [3, -1], [4, -2]])
    with pytest.raises(ValueError, match="num must be an int >= 2"):
        interpolate_latents(first, second, 1)
