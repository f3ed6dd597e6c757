"""Attention scores of the RNN encoder–decoder against their equations, in numpy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.models.encoder_decoders.rnn_attention import SourceAttention

B, S, D = 2, 4, 6


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_scores(kind, p, query, memory):
    if kind == "dot":
        return np.einsum("bsd,bd->bs", memory, query)
    if kind == "general":
        return np.einsum("bsd,bd->bs", memory @ p["key_projection"]["kernel"], query)
    keys = memory @ p["key_projection"]["kernel"]
    q = query @ p["query_projection"]["kernel"] + p["query_projection"]["bias"]
    return np.tanh(keys + q[:, None, :]) @ p["score_vector"]


@pytest.mark.parametrize("kind", ["additive", "dot", "general"])
def test_context_is_the_softmax_of_scores_over_valid_source_positions(kind, random_variables):
    attention = SourceAttention(kind, D)
    query = jax.random.normal(jax.random.key(0), (B, D))
    memory = jax.random.normal(jax.random.key(1), (B, S, D))
    mask = jnp.array([[True, True, True, False], [True, False, False, False]])

    def context(module, query, memory, mask):
        return module(query, module.keys(memory), memory, mask)

    variables = random_variables(attention, query, memory, mask, method=context)
    got = attention.apply(variables, query, memory, mask, method=context)
    p = jax.tree.map(np.asarray, variables.get("params", {}))
    scores = reference_scores(kind, p, np.asarray(query), np.asarray(memory))
    scores = np.where(mask, scores, -np.inf)
    expected = np.einsum("bs,bsd->bd", softmax(scores), memory)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
