"""The decode benchmark's variants compute what the library's decoders compute, so its ratios compare equal work."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from project_scripts import load_script

from seqjax.data import BOS_ID, EOS_ID
from seqjax.model_head import init_decode_state, make_step_fn

bench = load_script("benchmarks/decode.py", "decode_benchmark")
decode_steps = load_script("benchmarks/decode_steps.py", "decode_benchmark_steps")
TINY = bench.Shapes(
    batch=3, max_len=6, beam_size=3, vocab=13, d_model=16, layers=1, num_heads=2, d_ff=32, cached_steps_per_call=3
)


@pytest.fixture(scope="module")
def lm():
    return bench.build_lm(TINY)


def test_recomputing_step_gives_the_cached_step_log_probs(lm):
    model, head, params = lm
    inputs = np.random.default_rng(0).integers(0, TINY.vocab, (TINY.cache_len, TINY.batch)).astype(np.int32)
    cached_step = jax.jit(make_step_fn(model, head, params))
    recomputing_step = jax.jit(decode_steps.recomputing_step_fn(model, head, params))
    cached_state = init_decode_state(model, params, TINY.batch, TINY.cache_len)
    recomputing_state = decode_steps.empty_prefix(TINY.batch, TINY.cache_len)
    for tokens in inputs:
        cached, cached_state = cached_step(cached_state, tokens)
        recomputed, recomputing_state = recomputing_step(recomputing_state, tokens)
        np.testing.assert_allclose(recomputed, cached, rtol=1e-5, atol=1e-4)


def test_unreachable_eos_makes_every_row_run_every_step(lm):
    model, head, params = lm
    tokens = bench.compiled_greedy(model, head, params, shapes=TINY, recompute=False)
    assert not np.any(np.asarray(tokens) == EOS_ID)  # greedy pads only after an EOS


def test_python_loop_greedy_equals_the_compiled_greedy_decoder(lm):
    model, head, params = lm
    tokens = bench.python_loop_greedy(model, head, params, batch=TINY.batch, max_len=TINY.max_len)
    expected = bench.compiled_greedy(model, head, params, shapes=TINY, recompute=False)
    np.testing.assert_array_equal(tokens, expected)


def test_python_loop_beam_equals_beam_search_when_eos_is_unreachable(lm):
    model, head, params = lm
    sequences, scores = bench.python_loop_beam(
        model, head, params, batch=TINY.batch, beam_size=TINY.beam_size, max_len=TINY.max_len
    )
    expected_sequences, expected_scores = bench.compiled_beam(model, head, params, shapes=TINY, recompute=False)
    np.testing.assert_array_equal(sequences, expected_sequences)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5)


@pytest.mark.parametrize("recompute", [False, True])
def test_timed_model_steps_all_decode_the_same_position(lm, recompute):
    model, _, params = lm
    position, steps = 2, 3
    at_position = jnp.full((TINY.batch,), position, jnp.int32)
    if recompute:
        state = dict(decode_steps.empty_prefix(TINY.batch, position + 1), positions=at_position)
        decode_step = decode_steps.recomputing_decode_step
    else:
        state = dict(init_decode_state(model, params, TINY.batch, TINY.cache_len), positions=at_position)
        decode_step = decode_steps.cached_decode_step
    tokens = jnp.arange(TINY.batch, dtype=jnp.int32) + BOS_ID
    total = decode_steps.model_steps_at_position(
        model, params["model"], state, tokens, recompute=recompute, steps=steps
    )
    one, _ = jax.jit(decode_step, static_argnums=0)(model, params["model"], state, tokens)
    np.testing.assert_allclose(total, steps * one, rtol=1e-5, atol=1e-5)
