"""The model contract, checked on every language model: causality, decoding, padding, dtypes."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.models import build_model

V, B, T = 13, 2, 6
TINY = ModelConfig(d_model=16, layers=2, heads=2, d_ff=32, dropout=0.1, max_len=8)
# Every config runs the decoding test; the representative pair runs the rest, which
# exercise code the configs share.
CONFIGS = {
    "lstm": dataclasses.replace(TINY, kind="rnn", cell="lstm"),
    "gru": dataclasses.replace(TINY, kind="rnn", cell="gru"),
    "elman": dataclasses.replace(TINY, kind="rnn", cell="elman"),
    "lstm_residual": dataclasses.replace(TINY, kind="rnn", cell="lstm", residual=True),
    "transformer_sinusoidal": dataclasses.replace(TINY, kind="transformer"),
    "transformer_learned": dataclasses.replace(TINY, kind="transformer", positions="learned"),
    "transformer_post_ln": dataclasses.replace(TINY, kind="transformer", norm="post"),
    "transformer_dilated_window": dataclasses.replace(
        TINY, kind="transformer", window=2, dilation=2
    ),
    "nnlm": dataclasses.replace(TINY, kind="nnlm", context=3),
    "nnlm_direct": dataclasses.replace(TINY, kind="nnlm", context=2, direct=True),
}

REPRESENTATIVE = ["lstm", "transformer_sinusoidal"]
CAUSALITY = [
    "lstm", "gru", "elman", "transformer_learned", "transformer_dilated_window", "nnlm_direct"
]


@functools.cache
def setup(name, dtype=jnp.float32):
    model = build_model(CONFIGS[name], V, dtype=dtype)
    tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V)
    variables = model.init({"params": jax.random.key(1), "dropout": jax.random.key(2)}, tokens)
    return model, variables, tokens


def decode_all(model, variables, tokens):
    """Feeds tokens one at a time through decode_step inside one scan; returns [B, T, D]."""
    state = model.apply(variables, B, T, method="init_decode_state")

    def step(state, token):
        hidden, state = model.apply(variables, state, token, method="decode_step")
        return state, hidden

    _, hidden = jax.lax.scan(step, state, tokens.T)
    return jnp.swapaxes(hidden, 0, 1)


@pytest.mark.parametrize("name", CAUSALITY)
def test_hidden_at_t_ignores_tokens_after_t(name):
    model, variables, tokens = setup(name)
    changed = tokens.at[:, 3:].set((tokens[:, 3:] + 1) % V)
    before, after = model.apply(variables, tokens), model.apply(variables, changed)
    np.testing.assert_allclose(before[:, :3], after[:, :3], rtol=1e-5, atol=1e-6)
    assert not np.allclose(before[:, 3:], after[:, 3:])


@pytest.mark.parametrize("name", CONFIGS)
def test_decode_steps_reproduce_teacher_forced_hidden(name):
    model, variables, tokens = setup(name)
    expected = model.apply(variables, tokens)
    got = jax.jit(functools.partial(decode_all, model))(variables, tokens)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_every_decode_state_leaf_has_leading_batch_axis(name):
    model, variables, _ = setup(name)
    state = model.apply(variables, B, T, method="init_decode_state")
    assert all(leaf.shape[0] == B for leaf in jax.tree.leaves(state))


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_trailing_padding_does_not_change_valid_positions(name):
    model, variables, tokens = setup(name)
    padded = jnp.concatenate([tokens, jnp.zeros((B, 2), tokens.dtype)], axis=1)
    mask = jnp.arange(T + 2)[None, :] < T
    got = model.apply(variables, padded, mask=jnp.broadcast_to(mask, (B, T + 2)))
    np.testing.assert_allclose(got[:, :T], model.apply(variables, tokens), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_embedded_input_replaces_the_lookup(name):
    model, variables, tokens = setup(name)
    embedded = model.apply(variables, tokens, method="embed")
    assert embedded.shape == (B, T, TINY.d_model) and embedded.dtype == jnp.float32
    np.testing.assert_allclose(
        model.apply(variables, tokens, embedded=embedded),
        model.apply(variables, tokens),
        rtol=1e-6,
        atol=1e-6,
    )


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_target_embedding_table_is_params_embed_embedding(name):
    _, variables, _ = setup(name)
    assert variables["params"]["embed"]["embedding"].shape == (V, TINY.d_model)


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_dropout_acts_only_when_training(name):
    model, variables, tokens = setup(name)
    rngs = {"dropout": jax.random.key(5)}
    eval_hidden = model.apply(variables, tokens, rngs=rngs)
    np.testing.assert_array_equal(eval_hidden, model.apply(variables, tokens))
    assert not np.allclose(model.apply(variables, tokens, train=True, rngs=rngs), eval_hidden)


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_bfloat16_computation_keeps_float32_params_and_hidden(name):
    model, variables, tokens = setup(name, dtype=jnp.bfloat16)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))
    hidden = model.apply(variables, tokens)
    assert hidden.dtype == jnp.float32
    reference, _, _ = setup(name)
    np.testing.assert_allclose(hidden, reference.apply(variables, tokens), atol=0.1)
    state = model.apply(variables, B, T, method="init_decode_state")
    decode = jax.jit(functools.partial(model.apply, method="decode_step"))
    step_hidden, _ = decode(variables, state, tokens[:, 0])
    assert step_hidden.dtype == jnp.float32


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_wrong_input_shapes_are_rejected_on_the_host(name):
    model, variables, tokens = setup(name)
    with pytest.raises(ValueError, match="tokens must be a \\[B, T\\] integer array"):
        model.apply(variables, tokens[0])
    with pytest.raises(ValueError, match="mask must be a bool array"):
        model.apply(variables, tokens, mask=jnp.ones((B, T + 1), bool))
    with pytest.raises(ValueError, match="embedded must have shape"):
        model.apply(variables, tokens, embedded=jnp.zeros((B, T, 3)))
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        model.apply(variables, 0, T, method="init_decode_state")
