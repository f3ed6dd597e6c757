"""The encoder-only Transformers: bidirectional attention under the padding mask, the [MASK]
input row, and ELECTRA's generator and discriminator in one init."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.models import build_model, generates
from seqjax.models.encoders.electra import ElectraModelOptions

V, B, T, D = 13, 2, 6, 16
TINY = ModelConfig(kind="transformer_encoder", d_model=D, layers=2, num_heads=2, d_ff=32, dropout=0.0, max_len=8)


@pytest.fixture(scope="module")
def encoder(random_variables):
    model = build_model(TINY, V)
    tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V + 1)
    return model, random_variables(model, tokens), tokens


@pytest.mark.slow
def test_every_position_sees_the_tokens_after_it(encoder):
    model, variables, tokens = encoder
    changed = tokens.at[:, -1].set((tokens[:, -1] + 1) % V)
    difference = np.abs(np.asarray(model.apply(variables, changed) - model.apply(variables, tokens)))
    assert difference[:, 0].max() > 1e-4


def test_padded_keys_are_not_attended(encoder):
    model, variables, tokens = encoder
    mask = jnp.arange(T) < jnp.array([[4], [T]])
    changed = tokens.at[0, 4:].set((tokens[0, 4:] + 1) % V)
    np.testing.assert_allclose(
        model.apply(variables, changed, mask=mask)[0, :4], model.apply(variables, tokens, mask=mask)[0, :4], rtol=1e-5
    )


def test_mask_is_an_input_row_after_the_vocabulary_and_not_a_target(encoder):
    model, variables, _ = encoder
    assert SPECIAL_IDS.mask_id(V) == V and SPECIAL_IDS.count == 4  # the ids before stay where they were
    assert variables["params"]["embed"]["embedding"].shape == (V + 1, D)
    assert model.apply(variables, method="target_embedding").shape == (V, D)
    assert not generates(TINY)


def test_electra_initializes_generator_discriminator_and_classifier():
    model = build_model(
        dataclasses.replace(TINY, kind="electra").with_options(ElectraModelOptions(generator_layers=1)), V
    )
    tokens = jnp.zeros((B, T), jnp.int32)
    shapes = nn.meta.unbox(jax.eval_shape(lambda key: model.init(key, tokens), jax.random.key(0)))["params"]
    assert {"embed", "encoder", "generator_stack", "classifier"} == set(shapes)
    assert len([name for name in shapes["generator_stack"] if name.startswith("blocks")]) == 1
    assert len([name for name in shapes["encoder"] if name.startswith("blocks")]) == 2
    variables = jax.tree.map(lambda s: jnp.full(s.shape, 0.1, s.dtype), {"params": shapes})
    assert model.apply(variables, tokens, method="discriminate").shape == (B, T)
    assert model.apply(variables, tokens, method="generator").shape == (B, T, D)
