"""The model contract, checked on every language model: causality, decoding, padding, dtypes."""

import dataclasses
import functools
import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jaxpr_tools import matmuls

from seqjax import config as config_lib
from seqjax.config import Config, ModelConfig
from seqjax.models import build_model
from seqjax.models.classic.nnlm import NNLMOptions
from seqjax.training.core.experiment import build_experiment
from seqjax.training.loop import train

V, B, T = 13, 2, 6
TINY = ModelConfig(d_model=16, layers=2, num_heads=2, d_ff=32, dropout=0.1, max_len=8)
CONFIGS = {
    "lstm_residual": dataclasses.replace(TINY, kind="rnn", cell="lstm", residual=True),
    "gru": dataclasses.replace(TINY, kind="rnn", cell="gru"),
    "elman": dataclasses.replace(TINY, kind="rnn", cell="elman"),
    "transformer": dataclasses.replace(TINY, kind="transformer"),
    "transformer_learned_post_ln_dilated_window": dataclasses.replace(
        TINY, kind="transformer", positions="learned", norm="post", window=2, dilation=2
    ),
    "nnlm_direct": dataclasses.replace(TINY, kind="nnlm", context=3).with_options(NNLMOptions(direct=True)),
}
# The pair that runs the tests of code every config shares (embedding, dropout, dtypes).
REPRESENTATIVE = ["lstm_residual", "transformer"]
ALL_VALID = jnp.ones((B, T), bool)


class Prepared:
    """A model with random weights and one compiled eval forward, shared by the tests."""

    def __init__(self, name, random_variables):
        self.name = name
        self.model = build_model(CONFIGS[name], V)
        self.tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V)
        self.variables = random_variables(self.model, self.tokens)
        self.forward = jax.jit(lambda v, tokens, mask: self.model.apply(v, tokens, mask=mask))

    @functools.cached_property
    def initialized(self):
        """The variables of the model's own `init` (key 0), unboxed."""
        return nn.meta.unbox(jax.jit(self.model.init)(jax.random.key(0), self.tokens))

    def hidden(self, tokens, mask=ALL_VALID):
        return self.forward(self.variables, tokens, mask)


@pytest.fixture
def prepared(request, built_once):
    return built_once(Prepared, request.param)


def decode_all(model, variables, tokens):
    """Feeds tokens one at a time through decode_step inside one scan; returns [B, T, D]."""
    state = model.apply(variables, B, T, method="init_decode_state")

    def step(state, token):
        hidden, state = model.apply(variables, state, token, method="decode_step")
        return state, hidden

    _, hidden = jax.lax.scan(step, state, tokens.T)
    return jnp.swapaxes(hidden, 0, 1)


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_decode_steps_reproduce_teacher_forced_hidden(prepared):
    got = jax.jit(functools.partial(decode_all, prepared.model))(prepared.variables, prepared.tokens)
    np.testing.assert_allclose(got, prepared.hidden(prepared.tokens), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_hidden_at_t_ignores_tokens_after_t(prepared):
    tokens = prepared.tokens
    before = prepared.hidden(tokens)
    after = prepared.hidden(tokens.at[:, 3:].set((tokens[:, 3:] + 1) % V))
    np.testing.assert_allclose(before[:, :3], after[:, :3], rtol=1e-5, atol=1e-6)
    assert not np.allclose(before[:, 3:], after[:, 3:])


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_trailing_padding_does_not_change_valid_positions(prepared):
    valid = jnp.arange(T)[None, :] < jnp.array([[T], [T - 2]])
    garbage = jnp.where(valid, prepared.tokens, (prepared.tokens + 5) % V)
    np.testing.assert_allclose(
        jnp.where(valid[..., None], prepared.hidden(garbage, valid), 0.0),
        jnp.where(valid[..., None], prepared.hidden(prepared.tokens), 0.0),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_every_decode_state_leaf_has_leading_batch_axis(prepared):
    state = jax.eval_shape(lambda v: prepared.model.apply(v, B, T, method="init_decode_state"), prepared.variables)
    assert all(leaf.shape[0] == B for leaf in jax.tree.leaves(state))


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_target_embedding_table_is_params_embed_embedding(prepared):
    assert prepared.variables["params"]["embed"]["embedding"].shape == (V, TINY.d_model)


@pytest.mark.parametrize("prepared", REPRESENTATIVE, indirect=True)
def test_embedded_input_replaces_the_lookup(prepared):
    model, variables, tokens = prepared.model, prepared.variables, prepared.tokens
    embedded = model.apply(variables, tokens, method="embed")
    assert embedded.shape == (B, T, TINY.d_model) and embedded.dtype == jnp.float32
    np.testing.assert_allclose(
        jax.jit(model.apply)(variables, tokens, embedded=embedded),
        prepared.hidden(tokens),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("prepared", REPRESENTATIVE, indirect=True)
def test_dropout_acts_only_when_training(prepared):
    train = jax.jit(lambda v, tokens, key: prepared.model.apply(v, tokens, train=True, rngs={"dropout": key}))
    dropped = train(prepared.variables, prepared.tokens, jax.random.key(5))
    assert not np.allclose(dropped, prepared.hidden(prepared.tokens))


@pytest.mark.parametrize("prepared", REPRESENTATIVE, indirect=True)
def test_bfloat16_model_multiplies_bfloat16_operands_and_returns_float32_hidden(prepared):
    model = build_model(CONFIGS[prepared.name], V, dtype=jnp.bfloat16)
    variables, tokens = prepared.variables, prepared.tokens
    state = model.apply(variables, B, T, method="init_decode_state")
    forward = jax.jit(model.apply)
    decode = jax.jit(functools.partial(model.apply, method="decode_step"))
    for dots in (matmuls(forward, variables, tokens), matmuls(decode, variables, state, tokens[:, 0])):
        assert dots and all(dtypes == ("bfloat16", "bfloat16") for dtypes, _ in dots), dots
    hidden = forward(variables, tokens)
    assert hidden.dtype == jnp.float32
    # bfloat16 keeps 8 significant bits: the hidden states move by far more than float32
    # rounding (~1e-6 here), and not by much.
    gap = np.max(np.abs(np.asarray(hidden) - np.asarray(prepared.hidden(tokens))))
    assert 1e-4 < gap < 0.05, gap
    step_hidden, _ = decode(variables, state, tokens[:, 0])
    assert step_hidden.dtype == jnp.float32
    np.testing.assert_allclose(step_hidden, hidden[:, 0], atol=1e-3)


@pytest.mark.parametrize("prepared", REPRESENTATIVE, indirect=True)
def test_init_creates_float32_params_and_embedding_rows_of_about_unit_norm(prepared):
    params = prepared.initialized["params"]
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(params))
    table = np.asarray(params["embed"]["embedding"])  # [V, D] drawn from N(0, 1/D)
    assert np.mean(np.sum(table**2, axis=1)) == pytest.approx(1.0, abs=0.3)


@pytest.mark.parametrize("prepared", ["lstm_residual"], indirect=True)
def test_lstm_init_opens_the_forget_gate_and_draws_orthogonal_recurrent_kernels(prepared):
    width = CONFIGS["lstm_residual"].d_model
    for layer in ("rnn_layers_0", "rnn_layers_1"):
        params = prepared.initialized["params"][layer]
        # Gates in blocks of `width`: input, forget, cell, output; only the forget gate's bias is 1.
        np.testing.assert_array_equal(params["input_bias"], np.repeat([0.0, 1.0, 0.0, 0.0], width))
        kernel = np.asarray(params["recurrent_kernel"])  # [H, 4H], orthonormal rows
        np.testing.assert_allclose(kernel @ kernel.T, np.eye(width), atol=1e-5)


@pytest.mark.parametrize("prepared", ["transformer"], indirect=True)
def test_transformer_init_gives_layer_normalized_hidden(prepared):
    # The final LayerNorm starts with scale 1 and bias 0: each position's hidden has mean 0, variance 1.
    hidden = np.asarray(prepared.forward(prepared.initialized, prepared.tokens, ALL_VALID), np.float64)
    np.testing.assert_allclose(hidden.mean(axis=-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(hidden.var(axis=-1), 1.0, rtol=1e-3)


@pytest.mark.parametrize("prepared", REPRESENTATIVE, indirect=True)
def test_wrong_input_shapes_are_rejected_on_the_host(prepared):
    model, variables, tokens = prepared.model, prepared.variables, prepared.tokens
    with pytest.raises(ValueError, match="tokens must be a \\[B, T\\] integer array"):
        model.apply(variables, tokens[0])
    with pytest.raises(ValueError, match="mask must be a bool array"):
        model.apply(variables, tokens, mask=jnp.ones((B, T + 1), bool))
    with pytest.raises(ValueError, match="embedded must have shape"):
        model.apply(variables, tokens, embedded=jnp.zeros((B, T, 3)))
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        model.apply(variables, 0, T, method="init_decode_state")


@pytest.mark.slow
def test_bfloat16_training_run_logs_finite_losses_and_keeps_float32_parameters(tmp_path):
    cfg = config_lib.override(
        Config(),
        [
            "model.kind=rnn",
            "model.d_model=16",
            "model.layers=1",
            "data.num_train=64",
            "data.num_eval=4",
            "data.seq_len=8",
            "train.batch_size=8",
            "train.steps=3",
            "train.log_every=1",
            "train.eval_every=0",
            "train.checkpoint_every=0",
            "train.num_printed_samples=0",
            "optim.warmup_steps=0",
            "train.precision=bfloat16",
        ],
    )
    exp = build_experiment(cfg)
    tokens = exp.train_batches().batch(0)["inputs"]
    shapes = jax.eval_shape(lambda key: exp.model.init(key, tokens), jax.random.key(0))
    dots = matmuls(exp.model.apply, shapes, tokens)
    assert dots and all(dtypes == ("bfloat16", "bfloat16") for dtypes, _ in dots)
    train(cfg, str(tmp_path), echo=lambda line: None)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["split"] == "train"]
    assert len(losses) == 3 and np.all(np.isfinite(losses)), losses
    saved = ocp.StandardCheckpointer().restore(tmp_path / "checkpoints" / "3" / "state")
    assert {leaf.dtype for leaf in jax.tree.leaves(saved["params"])} == {np.dtype(np.float32)}
