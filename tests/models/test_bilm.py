"""ELMo's bidirectional LM: each direction causal its own way, one init for both, decoding
through the forward direction, and the contextual features."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.models import build_model

V, B, T, D = 13, 2, 6, 8
TINY = ModelConfig(kind="bilm", d_model=D, layers=2, dropout=0.0)
CONFIGS = {"lstm": TINY, "gru_residual": dataclasses.replace(TINY, cell="gru", residual=True)}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def bilm(request, random_variables):
    model = build_model(CONFIGS[request.param], V)
    tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V)
    return model, random_variables(model, tokens), tokens


def changed_before(tokens, t):
    return tokens.at[:, :t].set((tokens[:, :t] + 1) % V)


def changed_after(tokens, t):
    return tokens.at[:, t + 1 :].set((tokens[:, t + 1 :] + 1) % V)


@pytest.mark.parametrize("t", [1, 3, T - 1])
def test_backward_direction_is_causal_in_reverse(bilm, t):
    model, variables, tokens = bilm
    backward = jax.jit(lambda x: model.apply(variables, x, method="backward"))
    original = np.asarray(backward(tokens))
    np.testing.assert_allclose(backward(changed_before(tokens, t))[:, t:], original[:, t:], rtol=1e-6)
    assert np.abs(np.asarray(backward(changed_before(tokens, t)))[:, t - 1] - original[:, t - 1]).max() > 1e-4


@pytest.mark.parametrize("t", [0, 2, T - 2])
def test_forward_direction_is_causal(bilm, t):
    model, variables, tokens = bilm
    forward = jax.jit(lambda x: model.apply(variables, x))
    original = np.asarray(forward(tokens))
    np.testing.assert_allclose(forward(changed_after(tokens, t))[:, : t + 1], original[:, : t + 1], rtol=1e-6)
    assert np.abs(np.asarray(forward(changed_after(tokens, t)))[:, t + 1] - original[:, t + 1]).max() > 1e-4


def test_padding_at_the_end_leaves_the_backward_state_at_its_start(bilm):
    model, variables, tokens = bilm
    mask = jnp.arange(T) < jnp.array([[4], [T]])
    padded = model.apply(variables, tokens, mask=mask, method="backward")
    alone = model.apply(variables, tokens[:1, :4], method="backward")
    np.testing.assert_allclose(padded[0, :4], alone[0], rtol=1e-5, atol=1e-6)


def test_features_concatenate_both_directions_at_each_token(bilm):
    model, variables, tokens = bilm
    features = model.apply(variables, tokens, method="features")
    assert features.shape == (B, T, 2 * D)
    np.testing.assert_allclose(features[..., :D], model.apply(variables, tokens), rtol=1e-6)
    np.testing.assert_allclose(features[..., D:], model.apply(variables, tokens, method="backward"), rtol=1e-6)


def test_decode_steps_equal_the_forward_pass(bilm):
    model, variables, tokens = bilm
    state = model.apply(variables, B, T, method="init_decode_state")

    def step(state, token):
        hidden, state = model.apply(variables, state, token, method="decode_step")
        return state, hidden

    _, stepped = jax.lax.scan(step, state, tokens.T)
    np.testing.assert_allclose(jnp.swapaxes(stepped, 0, 1), model.apply(variables, tokens), rtol=1e-5, atol=1e-6)


def test_one_init_creates_both_directions():
    model = build_model(TINY, V)
    shapes = jax.eval_shape(lambda key: model.init(key, jnp.zeros((B, T), jnp.int32)), jax.random.key(0))
    names = set(shapes["params"])
    assert {"embed", "forward_layers_0", "forward_layers_1", "backward_layers_0", "backward_layers_1"} == names
