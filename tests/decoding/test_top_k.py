"""The blocked top-k against `lax.top_k`: same values and indices, ties and -inf included."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.decoding.top_k import MIN_LENGTH, block_size, top_k


def assert_same_as_lax(x, k):
    values, indices = jax.jit(top_k, static_argnums=1)(x, k)
    expected_values, expected_indices = jax.lax.top_k(x, k)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(values, expected_values)
    assert indices.dtype == jnp.int32 and values.dtype == x.dtype


@settings(max_examples=25, deadline=None)
@given(
    length=st.sampled_from([MIN_LENGTH, 2100, 10_000, 10_007]),  # 10,007 is prime: a padded last block
    k=st.integers(1, 16),
    levels=st.sampled_from([3, 50, 0]),  # few distinct values (many ties), or continuous ones
    seed=st.integers(0, 2**16),
)
def test_blocked_top_k_equals_lax_top_k(length, k, levels, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, (3, length)).astype(np.float32) if levels else rng.standard_normal((3, length))
    x = np.where(rng.random((3, length)) < 0.3, -np.inf, x).astype(np.float32)
    # A few larger values scattered over the row: their blocks rank first, while the k-th
    # best value is tied with entries of blocks that rank lower but sit earlier in the row.
    spikes = rng.integers(0, length, (2, k))
    x[1:][np.arange(2)[:, None], spikes] = np.max(x[1:][np.isfinite(x[1:])], initial=0) + rng.integers(1, 3, (2, k))
    x[0] = -np.inf  # a row with nothing but ties at -inf: the k lowest indices
    assert_same_as_lax(jnp.asarray(x), k)


def test_ties_across_blocks_go_to_the_lower_index():
    """Row 0: the best value sits in several blocks, at their ends and starts. Row 1: the
    second best is tied between an early block and a later one that ranks first (it holds
    the best): the early block's entry wins."""
    size = block_size(10_000)
    x = np.zeros((2, 10_000), np.float32)
    x[0, [3 * size - 1, 5 * size, 9_999, 7, 2 * size]] = 1.0
    x[1, [5 * size + 3, 9 * size]] = 2.0, 1.0
    x[1, 4] = 1.0
    assert_same_as_lax(jnp.asarray(x), 4)
    assert_same_as_lax(jnp.asarray(x), 2)


@pytest.mark.parametrize("length, k", [(MIN_LENGTH - 1, 3), (5_000, 17)])
def test_short_rows_and_large_k_take_lax_top_k_itself(length, k):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, length)), jnp.float32)
    assert_same_as_lax(x, k)


def test_block_size_divides_the_length_when_it_can():
    assert block_size(10_000) == 100 and block_size(32_000) == 100 and block_size(50_304) == 96
    assert block_size(10_007) == 100  # prime: padded


def test_beam_search_over_a_large_vocabulary_is_unchanged_by_the_blocked_ranking(monkeypatch):
    """A low-rank bigram model of V = 3000 whose log-probs are rounded (ties between beams and
    within a row): the same hypotheses and scores as with `lax.top_k` for every ranking."""
    from seqjax.decoding import beam_search

    beam_module = importlib.import_module("seqjax.decoding.beam_search")  # the package's name is the function

    rng = np.random.default_rng(1)
    vocab, width = 3000, 4
    embed, project = rng.standard_normal((vocab, width)), rng.standard_normal((width, vocab))
    table = jnp.asarray(np.round(jax.nn.log_softmax(embed @ project, axis=-1) * 2) / 2, jnp.float32)

    def search(ranking):
        monkeypatch.setattr(beam_module, "top_k", ranking)

        def step_fn(state, tokens):  # a new function: no compiled program is shared
            return table[tokens], state

        return beam_search(step_fn, {"row": jnp.zeros((3,))}, bos_id=1, eos_id=2, pad_id=0, beam_size=4, max_len=6)

    blocked, expected = search(top_k), search(jax.lax.top_k)
    np.testing.assert_array_equal(blocked[0], expected[0])
    np.testing.assert_array_equal(blocked[1], expected[1])
