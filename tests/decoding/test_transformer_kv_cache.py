"""Decoding a Transformer LM through its KV cache gives what re-running the full model on each prefix gives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.decoding import beam_search, greedy
from seqjax.models import build_model

VOCAB, BATCH, CACHE_LEN, BOS, EOS = 11, 3, 8, 1, 2
MAX_LEN = CACHE_LEN - 1  # the prompt token takes the first cache slot


@pytest.fixture(scope="module")
def transformer():
    cfg = ModelConfig(kind="transformer", d_model=16, layers=2, num_heads=2, d_ff=32, dropout=0.0, max_len=CACHE_LEN)
    model = build_model(cfg, VOCAB)
    variables = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, CACHE_LEN), jnp.int32))
    # A random output layer, scaled so that the next-token distributions are far from uniform.
    output = 3.0 * jax.random.normal(jax.random.key(1), (VOCAB, cfg.d_model))
    log_probs = lambda hidden: jax.nn.log_softmax(hidden @ output.T, axis=-1)

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
    _, cached_state = jax.jit(cached_step)(model.apply(variables, BATCH, CACHE_LEN, method="init_decode_state"), prompts)
    _, recomputing_state = jax.jit(recomputing_step)(
        (jnp.zeros((BATCH, CACHE_LEN), jnp.int32), jnp.zeros((BATCH,), jnp.int32)), prompts
    )
    return (cached_step, cached_state), (recomputing_step, recomputing_state)


def test_greedy_through_the_kv_cache_equals_rerunning_the_full_model(transformer):
    cached, recomputing = transformer
    tokens, lengths = greedy(*cached, bos_id=BOS, eos_id=EOS, pad_id=0, max_len=MAX_LEN)
    expected_tokens, expected_lengths = greedy(*recomputing, bos_id=BOS, eos_id=EOS, pad_id=0, max_len=MAX_LEN)
    np.testing.assert_array_equal(tokens, expected_tokens)
    np.testing.assert_array_equal(lengths, expected_lengths)
    assert len({tuple(row) for row in np.asarray(tokens)}) > 1


def test_beam_search_reorders_the_kv_cache_like_the_prefixes(transformer):
    cached, recomputing = transformer
    options = dict(bos_id=BOS, eos_id=EOS, pad_id=0, beam_size=4, max_len=MAX_LEN, length_penalty=0.6)
    sequences, scores = beam_search(*cached, **options)
    expected_sequences, expected_scores = beam_search(*recomputing, **options)
    np.testing.assert_array_equal(sequences, expected_sequences)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-4, atol=1e-5)
