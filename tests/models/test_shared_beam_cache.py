"""Beam search over a Transformer whose beams share their batch row's KV cache (and encoder
memory) finds what beam search finds when every beam holds and moves its own copy."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.contracts import SharedByBeams
from seqjax.decoding import beam_search
from seqjax.models import build_model

pytestmark = pytest.mark.slow  # long tests: scheduled first (tests/conftest.py)

V, V_SRC, B, K, STEPS, EOS, BOS = 13, 9, 2, 3, 32, 2, 1  # 32 steps: two phases (16, 32)
TINY = ModelConfig(kind="transformer", d_model=16, layers=2, num_heads=4, d_ff=32, dropout=0.0, max_len=36)
MODERN = dataclasses.replace(TINY, positions="rope", norm_type="rmsnorm", mlp="swiglu", kv_heads=1, bias=False)
# The unrolled classic LM is checked the same way against the decode benchmark's Python loop.
CONFIGS = {
    "modern_scanned_window": dataclasses.replace(MODERN, scan_layers=True, window=3),
    "seq2seq_gqa": dataclasses.replace(TINY, kind="transformer_seq2seq", kv_heads=2, layers=1),
    "seq2seq_modern_scanned": dataclasses.replace(MODERN, kind="transformer_seq2seq", scan_layers=True),
}
SRC = jax.random.randint(jax.random.key(1), (B, 4), 0, V_SRC)
SRC_MASK = jnp.arange(4)[None, :] < jnp.array([4, 2])[:, None]
PROMPT = jnp.array([[5, 7], [9, 4]], jnp.int32)


def model_and_state(cfg, draw):
    """The model, a step function with EOS unreachable, and the decode state of B rows after a
    two-token prompt (so the beams start from a cache that already holds something)."""
    seq2seq = cfg.kind == "transformer_seq2seq"
    model = build_model(cfg, V, src_vocab_size=V_SRC if seq2seq else None)
    source = {"src": SRC, "src_mask": SRC_MASK} if seq2seq else {}
    variables = draw(model, jnp.zeros((B, 6), jnp.int32), **source)
    output = jax.random.normal(jax.random.key(2), (V, cfg.d_model))

    def step_fn(state, tokens):
        hidden, state = model.apply(variables, state, tokens, method="decode_step")
        logits = (hidden @ output.T).at[:, EOS].set(-1e9)
        return jax.nn.log_softmax(logits, axis=-1), state

    state = model.apply(variables, B, cfg.max_len, method="init_decode_state", **source)
    for tokens in PROMPT.T:
        _, state = step_fn(state, tokens)
    return step_fn, state


def beams_with_their_own_copies(step_fn, state):
    """Beam search as a Python loop whose every beam holds the whole state, moved with it."""

    @jax.jit
    def advance(beams, totals, sequences, last, t):
        log_probs, beams = step_fn(beams, last)
        extended = (totals[:, :, None] + log_probs.reshape(B, K, V)).reshape(B, K * V)
        totals, index = jax.lax.top_k(extended, K)
        parents, tokens = index // V, (index % V).astype(jnp.int32)
        sequences = jnp.take_along_axis(sequences, parents[:, :, None], axis=1).at[:, :, t].set(tokens)
        rows = (jnp.arange(B)[:, None] * K + parents).reshape(-1)
        return jax.tree.map(lambda leaf: leaf[rows], beams), totals, sequences, tokens.reshape(-1)

    beams = jax.tree.map(lambda leaf: jnp.repeat(leaf, K, axis=0), state)  # through SharedByBeams too
    totals = jnp.full((B, K), -jnp.inf).at[:, 0].set(0.0)
    sequences = jnp.zeros((B, K, STEPS), jnp.int32)
    last = jnp.full((B * K,), BOS, jnp.int32)
    for t in range(STEPS):
        beams, totals, sequences, last = advance(beams, totals, sequences, last, t)
    return sequences, totals


@pytest.mark.parametrize("name", list(CONFIGS))
def test_beams_sharing_the_cache_find_the_beams_of_private_copies(name, random_variables):
    step_fn, state = model_and_state(CONFIGS[name], random_variables)
    sequences, scores = jax.jit(
        lambda state: beam_search(step_fn, state, bos_id=BOS, eos_id=EOS, pad_id=0, beam_size=K, max_len=STEPS)
    )(state)
    expected_sequences, expected_scores = beams_with_their_own_copies(step_fn, state)
    np.testing.assert_array_equal(sequences, expected_sequences)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-5)
    for row in np.asarray(sequences):  # the beams of a batch row differ: the cache's rows were told apart
        assert len(set(map(tuple, row))) == K


def test_shared_state_grows_only_along_its_axis_with_the_original_in_block_zero():
    cache = jnp.arange(2 * 3 * 4, dtype=jnp.float32).reshape(2, 3, 4)
    grown = SharedByBeams({"k": cache}, grow_axis=-2).for_beams(3).value["k"]
    assert grown.shape == (2, 9, 4)
    np.testing.assert_array_equal(grown[:, :3], cache)
    np.testing.assert_array_equal(grown[:, 3:], 0.0)
    memory = SharedByBeams(cache)
    assert memory.for_beams(3) is memory
