"""The encoder–decoder contract: decoding, causality, source padding, the source's influence."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_tools import matmuls

from seqjax.config import ModelConfig
from seqjax.models import build_model, is_seq2seq
from seqjax.models.encoder_decoders.rnn_attention import AttentionSeq2SeqOptions

V, V_SRC, B, T, S = 11, 9, 3, 5, 4
TINY = ModelConfig(d_model=16, layers=2, num_heads=2, d_ff=32, dropout=0.1, max_len=8)
CONFIGS = {
    "rnn_seq2seq": dataclasses.replace(TINY, kind="rnn_seq2seq"),
    "attention_additive": dataclasses.replace(TINY, kind="attention_seq2seq"),
    "attention_dot_gru_unidirectional": dataclasses.replace(
        TINY, kind="attention_seq2seq", cell="gru", bidirectional=False
    ).with_options(AttentionSeq2SeqOptions(attention="dot")),
    "transformer_seq2seq": dataclasses.replace(TINY, kind="transformer_seq2seq"),
}
SRC_MASK = jnp.arange(S)[None, :] < jnp.array([S, 2, 1])[:, None]


class Prepared:
    """A model with random weights and one compiled eval forward, shared by the tests."""

    def __init__(self, name, random_variables):
        self.name = name
        self.model = build_model(CONFIGS[name], V, src_vocab_size=V_SRC)
        self.tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V)
        self.src = jax.random.randint(jax.random.key(1), (B, S), 0, V_SRC)
        self.variables = random_variables(self.model, self.tokens, src=self.src, src_mask=SRC_MASK)
        self.forward = jax.jit(lambda v, tokens, src: self.model.apply(v, tokens, src=src, src_mask=SRC_MASK))

    def hidden(self, tokens=None, src=None):
        tokens = self.tokens if tokens is None else tokens
        return self.forward(self.variables, tokens, self.src if src is None else src)


@pytest.fixture
def prepared(request, built_once):
    return built_once(Prepared, request.param)


def decode_all(model, variables, tokens, src):
    state = model.apply(variables, B, T, src=src, src_mask=SRC_MASK, method="init_decode_state")

    def step(state, token):
        hidden, state = model.apply(variables, state, token, method="decode_step")
        return state, hidden

    _, hidden = jax.lax.scan(step, state, tokens.T)
    return jnp.swapaxes(hidden, 0, 1)


def test_is_seq2seq_names_the_encoder_decoder_kinds():
    assert all(is_seq2seq(cfg) for cfg in CONFIGS.values())
    assert not is_seq2seq(dataclasses.replace(TINY, kind="rnn"))


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_decode_steps_reproduce_teacher_forced_hidden(prepared):
    decode = jax.jit(functools.partial(decode_all, prepared.model))
    got = decode(prepared.variables, prepared.tokens, prepared.src)
    np.testing.assert_allclose(got, prepared.hidden(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_hidden_at_t_ignores_target_tokens_after_t_but_not_the_source(prepared):
    tokens, src, hidden = prepared.tokens, prepared.src, prepared.hidden()
    later = prepared.hidden(tokens=tokens.at[:, 2:].set((tokens[:, 2:] + 1) % V))
    np.testing.assert_allclose(later[:, :2], hidden[:, :2], rtol=1e-5, atol=1e-6)
    other_source = prepared.hidden(src=src.at[:, 0].set((src[:, 0] + 1) % V_SRC))
    assert not np.allclose(other_source[:, 0], hidden[:, 0])


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_masked_source_positions_do_not_matter(prepared):
    garbage = jnp.where(SRC_MASK, prepared.src, (prepared.src + 3) % V_SRC)
    np.testing.assert_allclose(prepared.hidden(src=garbage), prepared.hidden(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("prepared", CONFIGS, indirect=True)
def test_decode_state_leaves_lead_with_batch_and_embeddings_are_named(prepared):
    model, variables, src = prepared.model, prepared.variables, prepared.src
    state = jax.eval_shape(
        lambda v, src: model.apply(v, B, T, src=src, src_mask=SRC_MASK, method="init_decode_state"),
        variables,
        src,
    )
    assert all(leaf.shape[0] == B for leaf in jax.tree.leaves(state))
    assert variables["params"]["embed"]["embedding"].shape == (V, TINY.d_model)
    assert variables["params"]["src_embed"]["embedding"].shape == (V_SRC, TINY.d_model)


# The Transformer's blocks are the LM's, whose dropout test_language_models covers; the
# attention decoder's dropout runs under nn.scan with per-step rngs of its own.
@pytest.mark.parametrize("prepared", ["attention_additive"], indirect=True)
def test_training_applies_dropout(prepared):
    train = jax.jit(
        lambda v, tokens, src, key: prepared.model.apply(
            v, tokens, src=src, src_mask=SRC_MASK, train=True, rngs={"dropout": key}
        )
    )
    dropped = train(prepared.variables, prepared.tokens, prepared.src, jax.random.key(4))
    assert not np.allclose(dropped, prepared.hidden())


@pytest.mark.parametrize("prepared", ["attention_additive", "transformer_seq2seq"], indirect=True)
def test_bfloat16_model_multiplies_bfloat16_operands_and_returns_float32_hidden(prepared):
    half = build_model(CONFIGS[prepared.name], V, src_vocab_size=V_SRC, dtype=jnp.bfloat16)
    forward = jax.jit(lambda v, tokens, src: half.apply(v, tokens, src=src, src_mask=SRC_MASK))
    dots = matmuls(forward, prepared.variables, prepared.tokens, prepared.src)
    # The RNN decoder's source attention scores and reads the memory [B, S, D] in float32.
    memory = (B, S, TINY.d_model)
    float32 = [shapes for dtypes, shapes in dots if dtypes != ("bfloat16", "bfloat16")]
    assert all(memory in shapes for shapes in float32) and len(float32) < len(dots), dots
    half_hidden = forward(prepared.variables, prepared.tokens, prepared.src)
    assert half_hidden.dtype == jnp.float32
    # Far more than float32 rounding (~1e-6 here), and not by much.
    gap = np.max(np.abs(np.asarray(half_hidden) - np.asarray(prepared.hidden())))
    assert 1e-4 < gap < 0.05, gap


@pytest.mark.parametrize("prepared", ["rnn_seq2seq"], indirect=True)
def test_missing_or_mismatched_source_is_rejected_on_the_host(prepared):
    model, variables = prepared.model, prepared.variables
    tokens, src = prepared.tokens, prepared.src
    with pytest.raises(ValueError, match="src must be a \\[B, S\\] integer array"):
        model.apply(variables, tokens)
    with pytest.raises(ValueError, match="src batch must equal the target batch 3, got 2"):
        model.apply(variables, tokens, src=src[:2])
    with pytest.raises(ValueError, match="src_mask must be a bool array"):
        model.apply(variables, tokens, src=src, src_mask=SRC_MASK[:, :2])
