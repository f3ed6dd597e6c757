"""cuDNN's packed layout, checked on this CPU: what the kernel is given (each segment's length and
first token, through JAX's own conversion to cuDNN's offsets into the flattened batch) describes
the segments of the ids, and attention over the tokens it describes equals XLA's under the
segment mask. Keys and values of fewer heads than the queries included, which the installed JAX
misplaces unless they are repeated first."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from attention_cases import MASKS, B, T
from jax._src.cudnn import fused_attention_stablehlo as fused

from seqjax.models.attention_kernels.cudnn import check_spans, packed_arguments, segment_spans
from seqjax.models.attention_kernels.xla import xla_attention
from seqjax.models.transformer.masks import self_mask

PACKED = [name for name, parts in MASKS.items() if "segments" in parts]


def segments_read(lengths, offsets, array):
    """[B, T] int: the sequence of cuDNN's flattened batch each token of `array` [B, T, heads, Dh]
    lies in (-1: none), from the lengths and offsets (in elements of `array`) cuDNN reads."""
    batch, length, heads, width = array.shape
    read = np.full(batch * length, -1)
    for sequence, (start, count) in enumerate(zip(np.asarray(offsets).ravel(), np.asarray(lengths).ravel())):
        if count > 0:
            first = int(start) // (heads * width)
            read[first : first + int(count)] = sequence
    return read.reshape(batch, length)


def attention_as_read(arguments, causal, window):
    """Attention over the segments cuDNN reads (`segments_read` of JAX's conversion), causal and
    windowed as its mask kind and window say."""
    q, k, v = arguments["query"], arguments["key"], arguments["value"]
    converted = fused._fix_seqlen_offsets(
        arguments["q_seqlen"], arguments["kv_seqlen"], arguments["q_offsets"], arguments["kv_offsets"], q, k
    )
    queries, keys = segments_read(converted[0], converted[2], q), segments_read(converted[1], converted[3], k)
    allowed = (queries[:, :, None] == keys[:, None, :]) & (queries[:, :, None] >= 0)
    distance = np.arange(T)[:, None] - np.arange(T)[None, :]
    if causal:
        allowed &= distance >= 0
    if window:
        allowed &= distance < window
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) * arguments["scale"]
    weights = jax.nn.softmax(jnp.where(allowed[:, None], logits, -jnp.inf), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", jnp.nan_to_num(weights), v), queries >= 0


def test_segment_spans_are_each_segments_length_and_first_token():
    ids = jnp.array([[1, 1, 2, 2, 2, 0], [1, 2, 2, 2, 3, 3]], jnp.int32)
    lengths, offsets = segment_spans(ids, 4)
    np.testing.assert_array_equal(lengths, [[2, 3, -1, -1], [1, 3, 2, -1]])
    np.testing.assert_array_equal(offsets, [[0, 2, -1, -1, -1], [0, 1, 4, -1, -1]])


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize("name", PACKED)
def test_what_cudnn_reads_of_packed_rows_is_attention_within_their_segments(name, kv_heads):
    q = jax.random.normal(jax.random.key(0), (B, T, 4, 8))
    k, v = jax.random.normal(jax.random.key(1), (2, B, T, kv_heads, 8))
    parts = {key: jnp.asarray(value) for key, value in MASKS[name].items()}
    mask = self_mask(**parts, max_segments=3)
    arguments = packed_arguments(q, k, v, mask, mask.segments)
    causal = arguments["mask_type"] == fused.MaskType.PADDING_CAUSAL
    got, in_segment = attention_as_read(arguments, causal, arguments["sliding_window_length"])
    real = np.asarray(mask.segments > 0) & (np.asarray(mask.valid) if mask.valid is not None else True)
    np.testing.assert_array_equal(in_segment, real)  # every real token read once, padding never
    np.testing.assert_allclose(got[real], xla_attention(q, k, v, mask)[real], rtol=1e-5, atol=1e-5)


def test_packed_ids_beyond_the_bound_or_split_segments_are_refused_by_name():
    with pytest.raises(ValueError, match=r"segment_ids must be <= data.max_segments=2.*got 3"):
        check_spans(np.array([[1, 2, 3, 0]]), 2)
    with pytest.raises(ValueError, match=r"segment 1 of row 1 is not contiguous \(tokens \[0, 2\]\)"):
        check_spans(np.array([[1, 1, 2, 0], [1, 2, 1, 0]]), 2)
    check_spans(np.array([[1, 1, 2, 0], [1, 2, 2, 0]]), 2)
