"""Decoding a Transformer LM through its KV cache gives what re-running the full model on each prefix gives,
in one loop over the whole cache (8 slots) and in phases over a growing one (40 slots: the decoders
hold it cut to 21 slots for the first 20 steps, then grow it; EOS is masked there so that every row
runs through both phases), with as many key/value heads as query heads, or fewer (grouped-query and
multi-query attention)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.decoding import beam_search, greedy
from seqjax.models import build_model

VOCAB, BATCH, BOS, EOS = 11, 3, 1, 2
CACHE_LENS = {"one_loop": 8, "phases": 40}
# (num_heads, kv_heads): 0 is one key/value head per query head.
HEADS = {"multi_head": (2, 0), "grouped_query": (4, 2), "multi_query": (4, 1)}
# Cutting and growing the cache does not depend on the heads: each head layout runs in one of the two.
CASES = [("one_loop", "multi_head"), ("one_loop", "grouped_query"), ("phases", "multi_query")]


@pytest.fixture(scope="module", params=CASES, ids="-".join)
def transformer(request):
    """(cached, recomputing) step functions and states, and max_len; the prompt token takes
    the first cache slot."""
    loop, heads = request.param
    cache_len = CACHE_LENS[loop]
    num_heads, kv_heads = HEADS[heads]
    cfg = ModelConfig(
        kind="transformer",
        d_model=16,
        layers=2,
        num_heads=num_heads,
        kv_heads=kv_heads,
        d_ff=32,
        dropout=0.0,
        max_len=cache_len,
    )
    model = build_model(cfg, VOCAB)
    variables = nn.meta.unbox(jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, cache_len), jnp.int32)))
    # A random output layer, scaled so that the next-token distributions are far from uniform.
    output = 3.0 * jax.random.normal(jax.random.key(1), (VOCAB, cfg.d_model))
    eos_bias = jnp.zeros(VOCAB).at[EOS].set(-1e9 if loop == "phases" else 0.0)

    def log_probs(hidden):
        return jax.nn.log_softmax(hidden @ output.T + eos_bias, axis=-1)

    def cached_step(state, tokens):
        hidden, state = model.apply(variables, state, tokens, method="decode_step")
        return log_probs(hidden), state

    def recomputing_step(state, tokens):
        """Writes the token into the prefix and re-runs the whole (causal) model on it."""
        prefix, position = state
        rows = jnp.arange(tokens.shape[0])
        prefix = prefix.at[rows, position].set(tokens)
        hidden = model.apply(variables, prefix)[rows, position]
        return log_probs(hidden), (prefix, position + 1)

    # A different one-token prompt per row, fed through each step function, so that rows differ.
    prompts = jnp.array([3, 5, 7], jnp.int32)
    _, cached_state = jax.jit(cached_step)(
        model.apply(variables, BATCH, cache_len, method="init_decode_state"), prompts
    )
    _, recomputing_state = jax.jit(recomputing_step)(
        (jnp.zeros((BATCH, cache_len), jnp.int32), jnp.zeros((BATCH,), jnp.int32)), prompts
    )
    return (cached_step, cached_state), (recomputing_step, recomputing_state), cache_len - 1


def test_greedy_through_the_kv_cache_equals_rerunning_the_full_model(transformer):
    cached, recomputing, max_len = transformer
    tokens, lengths = greedy(*cached, bos_id=BOS, eos_id=EOS, pad_id=0, max_len=max_len)
    expected_tokens, expected_lengths = greedy(*recomputing, bos_id=BOS, eos_id=EOS, pad_id=0, max_len=max_len)
    np.testing.assert_array_equal(tokens, expected_tokens)
    np.testing.assert_array_equal(lengths, expected_lengths)
    assert len({tuple(row) for row in np.asarray(tokens)}) > 1


def test_beam_search_reorders_the_kv_cache_like_the_prefixes(transformer):
    cached, recomputing, max_len = transformer
    options = dict(bos_id=BOS, eos_id=EOS, pad_id=0, beam_size=4, max_len=max_len, length_penalty=0.6)
    sequences, scores = beam_search(*cached, **options)
    expected_sequences, expected_scores = beam_search(*recomputing, **options)
    np.testing.assert_array_equal(sequences, expected_sequences)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-4, atol=1e-5)
