"""The XLA kernel computes blocks of queries, each over the keys its mask's structured part
lets it see: the blocks cover every query once, the key ranges hold every visible key, and the
blocked attention equals the unblocked one in value and gradient for every mask."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from attention_cases import MASKS, B, T, reference_mask

from seqjax.models.attention_kernels import xla
from seqjax.models.transformer.masks import self_mask


@pytest.mark.parametrize("length", [1, 63, 64, 65, 128, 1000, 1024, 4096, 5000])
def test_query_blocks_cover_each_query_once_in_at_most_the_maximum_number_of_blocks(length):
    blocks = xla.query_blocks(length)
    assert blocks[0][0] == 0 and blocks[-1][1] == length
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(blocks))
    assert all(end > start for start, end in blocks)
    assert len(blocks) <= xla.MAX_QUERY_BLOCKS
    assert all(end - start <= max(xla.QUERY_BLOCK, -(-length // xla.MAX_QUERY_BLOCKS)) for start, end in blocks)


def test_short_rows_are_one_block_and_the_benchmark_rows_two():
    assert xla.query_blocks(xla.QUERY_BLOCK) == [(0, xla.QUERY_BLOCK)]
    assert xla.query_blocks(128) == [(0, 64), (64, 128)]


@pytest.mark.parametrize(
    "causal, window, dilation",
    [(False, 0, 1), (True, 0, 1), (True, 1, 1), (True, 3, 1), (True, 2, 2), (True, 3, 3), (True, 9, 2)],
)
def test_key_range_holds_every_visible_key_and_starts_at_the_earliest_one(causal, window, dilation):
    length = 11
    allowed = reference_mask(causal, window, dilation, batch=1, length=length)[0, 0]
    mask = self_mask(causal=causal, window=window, dilation=dilation)
    for start in range(length):
        for end in range(start + 1, length + 1):
            first, last = mask.key_range(start, end, length)
            seen = np.flatnonzero(allowed[start:end].any(axis=0))
            assert first <= seen.min() and seen.max() < last
            assert last == (end if causal else length)  # the last query sees itself: nothing to skip
            if causal and window and start - (window - 1) * dilation >= 0:
                assert allowed[start, first]  # the first query's farthest key: the range is tight


@pytest.mark.parametrize("block", [2, 4])
@pytest.mark.parametrize("name", MASKS)
def test_blocked_attention_equals_one_block_in_value_and_gradient(name, block, monkeypatch):
    q = jax.random.normal(jax.random.key(11), (B, T, 4, 8))
    k, v, cotangent = jax.random.normal(jax.random.key(12), (3, B, T, 2, 8))
    parts = MASKS[name]
    mask = self_mask(**{key: jnp.asarray(x) if isinstance(x, np.ndarray) else x for key, x in parts.items()})
    # A query that sees no key has no defined output (blocks average different values there).
    seen = reference_mask(**parts).any(-1)[:, 0]  # [B, T]
    cotangent = jnp.where(seen[:, :, None, None], jnp.repeat(cotangent, 2, axis=2), 0.0)

    def outputs_and_gradients(query_block):
        monkeypatch.setattr(xla, "QUERY_BLOCK", query_block)
        monkeypatch.setattr(xla, "MAX_QUERY_BLOCKS", T)

        def run(*qkv):
            outputs, pullback = jax.vjp(lambda *a: xla.xla_attention(*a, mask=mask), *qkv)
            return outputs, pullback(cotangent)

        return jax.jit(run)(q, k, v)

    outputs, grads = outputs_and_gradients(block)
    assert len(xla.query_blocks(T)) == -(-T // block)
    one_block, one_block_grads = outputs_and_gradients(T)
    np.testing.assert_allclose(outputs[seen], one_block[seen], rtol=1e-5, atol=1e-6)
    for axis, got, expected in zip("qkv", grads, one_block_grads):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"d{axis}")
