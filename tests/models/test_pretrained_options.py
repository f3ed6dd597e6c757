"""The model options a pretrained checkpoint needs: the norms' epsilon, embeddings added
unscaled, and the exact (erf) GELU; each against its equation in numpy."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.models.transformer.blocks import ACTIVATIONS, make_norm
from seqjax.models.transformer.positions import PositionalInputs

TINY = ModelConfig(kind="transformer", d_model=8, layers=1, num_heads=2, d_ff=16, dropout=0.0, max_len=4)
X = np.asarray(jax.random.normal(jax.random.key(0), (3, 8)))


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm"])
def test_norm_eps_is_the_epsilon_added_to_the_variance(norm_type):
    eps = 0.5  # large enough that any other epsilon shows
    norm = make_norm(dataclasses.replace(TINY, norm_type=norm_type, norm_eps=eps), jnp.float32)
    got = norm.apply(norm.init(jax.random.key(0), X), X)
    centred = X - X.mean(-1, keepdims=True) if norm_type == "layernorm" else X
    want = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", [True, False])
def test_embeddings_are_scaled_by_sqrt_d_only_when_asked(scale):
    inputs = PositionalInputs(dataclasses.replace(TINY, positions="rope", scale_embeddings=scale))
    got = inputs.apply({}, X[None], jnp.arange(3))[0]
    np.testing.assert_allclose(got, X * (math.sqrt(8) if scale else 1.0), rtol=1e-6)


def test_gelu_exact_is_the_erf_gelu_and_gelu_the_tanh_approximation():
    x = np.linspace(-4, 4, 41)
    erf = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    tanh = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(ACTIVATIONS["gelu_exact"](jnp.asarray(x, jnp.float32)), erf, atol=1e-6)
    np.testing.assert_allclose(ACTIVATIONS["gelu"](jnp.asarray(x, jnp.float32)), tanh, atol=1e-6)
    assert np.abs(erf - tanh).max() > 1e-4  # the two differ: the choice matters
