"""Decoding in phases over a growing KV cache: the phases, the resizing, and the loops it compiles.

That decoding in phases finds what re-running the full model finds is tested with the KV cache
(test_transformer_kv_cache.py) and with beams sharing it (tests/models/test_shared_beam_cache.py).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_tools import equations

from seqjax.config import ModelConfig
from seqjax.contracts import GrowsWithSteps
from seqjax.decoding import beam_search, greedy
from seqjax.decoding.phases import phase_ends
from seqjax.models import build_model

V, B, BOS, EOS = 9, 2, 1, 2


@pytest.mark.parametrize(
    "max_len, ends", [(128, (16, 32, 64, 128)), (100, (25, 50, 100)), (30, (30,)), (31, (16, 31)), (1, (1,))]
)
def test_phases_halve_max_len_down_to_sixteen_steps(max_len, ends):
    assert phase_ends(max_len) == ends


def test_resizing_cuts_or_pads_every_block_at_its_end():
    blocks = jnp.arange(2 * 3 * 4 * 5).reshape(2, 3 * 4, 5)  # [B, 3 blocks of 4 positions, 5]
    grown = GrowsWithSteps({"k": blocks}, axis=1).resized(4, 6).value["k"]
    assert grown.shape == (2, 18, 5)
    for block in range(3):
        np.testing.assert_array_equal(grown[:, 6 * block : 6 * block + 4], blocks[:, 4 * block : 4 * block + 4])
        np.testing.assert_array_equal(grown[:, 6 * block + 4 : 6 * block + 6], 0)
    cut = GrowsWithSteps({"k": grown}, axis=-2).resized(6, 4).value["k"]
    np.testing.assert_array_equal(cut, blocks)


def lm_decoder(kind, capacity):
    cfg = ModelConfig(kind=kind, d_model=8, layers=1, num_heads=2, d_ff=16, dropout=0.0, max_len=capacity)
    model = build_model(cfg, V)
    variables = nn.meta.unbox(model.init(jax.random.key(0), jnp.zeros((1, 4), jnp.int32)))

    def step_fn(state, tokens):
        hidden, state = model.apply(variables, state, tokens, method="decode_step")
        return jax.nn.log_softmax(hidden @ variables["params"]["embed"]["embedding"].T), state

    return step_fn, model.apply(variables, B, capacity, method="init_decode_state")


def loops_and_their_cache_lengths(decode, state):
    """(number of while loops, slots of the K cache each carries) in decode(state)'s jaxpr."""
    loops = list(equations(jax.make_jaxpr(decode)(state).jaxpr, "while"))
    cache_shape = jax.tree.leaves(state["cache"])[0].shape
    lengths = [
        var.aval.shape[-2]
        for loop in loops
        for var in loop.invars
        if var.aval.shape[:-2] == cache_shape[:-2] and var.aval.shape[-1] == cache_shape[-1]
    ]
    return len(loops), sorted(set(lengths))


@pytest.mark.parametrize("beams", [1, 3])
def test_a_transformer_decodes_in_phases_each_over_the_slots_it_can_reach(beams):
    step_fn, state = lm_decoder("transformer", 70)  # 64 steps: phases end at 16, 32, 64
    ids = dict(bos_id=BOS, eos_id=EOS, pad_id=0, max_len=64)
    if beams == 1:

        def decode(s):
            return greedy(step_fn, s, **ids)
    else:

        def decode(s):
            return beam_search(step_fn, s, beam_size=beams, **ids)

    count, lengths = loops_and_their_cache_lengths(decode, state)
    # 70 - 64 + 16 slots, then 16 and 32 more; beam search's shared cache holds a block per beam
    assert (count, lengths) == (3, [beams * 22, beams * 38, beams * 70])


def test_a_state_without_a_growing_part_decodes_in_one_loop():
    step_fn, state = lm_decoder("rnn", 70)

    def decode(s):
        return greedy(step_fn, s, bos_id=BOS, eos_id=EOS, pad_id=0, max_len=64)

    assert len(list(equations(jax.make_jaxpr(decode)(state).jaxpr, "while"))) == 1


def test_a_state_with_room_for_fewer_positions_than_the_steps_is_refused():
    step_fn, state = lm_decoder("transformer", 8)
    with pytest.raises(ValueError, match=r"holds 8 positions, fewer than max_len=9"):
        greedy(step_fn, state, bos_id=BOS, eos_id=EOS, pad_id=0, max_len=9)
