"""Greedy decoding against a numpy argmax loop, padding and lengths, early stop, use inside jit."""

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.decoding import greedy


def reference_greedy(table_row, lm, *, bos_id, eos_id, max_len):
    tokens = []
    while len(tokens) < max_len and (not tokens or tokens[-1] != eos_id):
        tokens.append(int(np.argmax(lm.next_log_probs(table_row, bos_id, tokens))))
    return tokens


def test_greedy_takes_the_most_probable_token_until_eos_then_pads(prefix_lm):
    vocab, max_len, bos_id, eos_id = 4, 5, 0, 3
    table = prefix_lm.random_table(np.random.default_rng(2), 8, vocab, max_len, eos_id=eos_id, eos_bias=0.5)
    tokens, lengths = greedy(
        prefix_lm.step_fn, prefix_lm.init_state(table, max_len), bos_id=bos_id, eos_id=eos_id, pad_id=0, max_len=max_len
    )
    assert tokens.dtype == jnp.int32 and lengths.dtype == jnp.int32
    for row in range(8):
        expected = reference_greedy(table[row], prefix_lm, bos_id=bos_id, eos_id=eos_id, max_len=max_len)
        np.testing.assert_array_equal(tokens[row], expected + [0] * (max_len - len(expected)))
        assert lengths[row] == len(expected)


def test_rows_that_never_emit_eos_have_length_max_len(prefix_lm):
    vocab, max_len, eos_id = 3, 4, 2
    table = prefix_lm.random_table(np.random.default_rng(4), 3, vocab, max_len, eos_id=eos_id, eos_bias=-50.0)
    tokens, lengths = greedy(
        prefix_lm.step_fn, prefix_lm.init_state(table, max_len), bos_id=0, eos_id=eos_id, pad_id=0, max_len=max_len
    )
    np.testing.assert_array_equal(lengths, [max_len] * 3)
    assert not np.any(np.asarray(tokens) == eos_id)


def test_greedy_stops_once_every_row_has_ended(count_steps):
    def eos_first(state, tokens):
        return jnp.broadcast_to(jnp.log(jnp.array([0.1, 0.9])), (tokens.shape[0], 2)), state

    counted, calls = count_steps(eos_first)
    tokens, lengths = greedy(counted, jnp.zeros((4,)), bos_id=0, eos_id=1, pad_id=0, max_len=50)
    jax.effects_barrier()
    assert len(calls) == 1
    np.testing.assert_array_equal(lengths, [1, 1, 1, 1])


def test_greedy_inside_a_user_jit_matches_eager(prefix_lm):
    max_len = 4
    state = prefix_lm.init_state(prefix_lm.random_table(np.random.default_rng(6), 2, 3, max_len), max_len)
    eager = greedy(prefix_lm.step_fn, state, bos_id=1, eos_id=0, pad_id=0, max_len=max_len)
    jitted = jax.jit(lambda s: greedy(prefix_lm.step_fn, s, bos_id=1, eos_id=0, pad_id=0, max_len=max_len))(state)
    np.testing.assert_array_equal(jitted[0], eager[0])
    np.testing.assert_array_equal(jitted[1], eager[1])


def test_ties_infinities_and_nans_pick_the_first_index_as_argmax_does():
    rows = np.array(
        [
            [-1.0, -0.5, -0.5, -2.0],  # a tie: the first maximum
            [-np.inf, -np.inf, -np.inf, -np.inf],  # nothing possible: index 0
            [-np.inf, -3.0, -np.inf, -3.0],
            [-1.0, np.nan, -0.1, np.nan],  # a NaN wins, the first one
            [0.0, 0.0, 0.0, 0.0],
        ],
        np.float32,
    )

    def step_fn(state, tokens):
        return jnp.asarray(rows), state

    tokens, _ = greedy(step_fn, jnp.zeros((len(rows),)), bos_id=0, eos_id=3, pad_id=0, max_len=1)
    np.testing.assert_array_equal(tokens[:, 0], np.argmax(rows, axis=-1))
    np.testing.assert_array_equal(tokens[:, 0], [1, 0, 1, 1, 0])
