"""`data.max_segments`: packed rows of at most that many lines or pairs, each segment one
contiguous run of slots, every target still in exactly one of them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.data.batching.packing import (
    PackedLMBatches,
    PackedSeq2SeqBatches,
    best_fit_decreasing,
    packed_lm_eval_batches,
)
from seqjax.data.tokenizers.vocab import EOS_ID
from seqjax.training.core.experiment import validate_train


def line_stream(lengths):
    """Line k is the token 10 + k repeated lengths[k] times, then `</s>`."""
    return np.concatenate([np.append(np.full(n, 10 + k, np.int32), EOS_ID) for k, n in enumerate(lengths)])


def assert_bounded_contiguous(segment_ids, bound):
    for row in segment_ids:
        assert row.max() <= bound
        for k in np.unique(row[row > 0]):
            at = np.flatnonzero(row == k)
            assert at[-1] - at[0] + 1 == len(at)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 10), min_size=1, max_size=40), st.integers(0, 4))
def test_best_fit_decreasing_puts_at_most_max_segments_pieces_in_a_row(lengths, bound):
    lengths = np.array(lengths)
    row, offset, segment = best_fit_decreasing(lengths, 10, bound)
    for r in range(row.max() + 1):
        pieces = np.flatnonzero(row == r)
        assert bound == 0 or len(pieces) <= bound
        assert sorted(segment[pieces]) == list(range(1, len(pieces) + 1))
        spans = sorted(zip(offset[pieces], offset[pieces] + lengths[pieces]))
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] <= 10
    if bound == 0:  # no bound: the packing of before
        np.testing.assert_array_equal(row, best_fit_decreasing(lengths, 10)[0])


def test_bounded_lm_rows_hold_every_target_once_in_at_most_the_bound_of_segments():
    stream = line_stream([1, 2, 1, 3, 1, 1, 2, 1, 1, 4, 1, 2, 1, 1, 1, 2])
    free = PackedLMBatches(stream, batch_size=2, seq_len=16, seed=0)
    bounded = PackedLMBatches(stream, batch_size=2, seq_len=16, seed=0, max_segments=2)
    assert free.segments.max() > 2 and bounded.segments.max() == 2 and bounded.num_rows > free.num_rows
    assert sorted(bounded.pairs[bounded.pairs >= 0].tolist()) == list(range(len(stream)))
    assert_bounded_contiguous(bounded.segments, 2)
    scored = [batch for batch in packed_lm_eval_batches(stream, 4, 16, max_segments=2)]
    assert_bounded_contiguous(np.concatenate([batch["segment_ids"] for batch in scored]), 2)
    assert sum(int(batch["mask"].sum()) for batch in scored) == len(stream)


def test_bounded_pair_rows_hold_at_most_the_bound_of_pairs():
    rng = np.random.default_rng(0)
    src = [np.full(rng.integers(1, 3), 10 + i, np.int32) for i in range(30)]
    tgt = [np.full(rng.integers(0, 3), 50 + i, np.int32) for i in range(30)]
    batches = PackedSeq2SeqBatches(src, tgt, batch_size=2, length=16, seed=0, max_segments=3)
    assert max(len(members) for members in batches.members) == 3
    for index in range(batches.batches_per_epoch):
        batch = batches.batch(index)
        assert_bounded_contiguous(batch["segment_ids"], 3)
        assert_bounded_contiguous(batch["src_segment_ids"], 3)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["data.max_segments=-1"], r"data.max_segments must be an int >= 0, got -1"),
        (["data.packing=false", "data.max_segments=8"], r"data.max_segments=8 bounds packed rows: it needs data"),
    ],
)
def test_a_bad_segment_bound_is_refused_by_name(overrides, message):
    cfg = config_lib.override(Config(), ["data.packing=true", *overrides])
    with pytest.raises(ValueError, match=message):
        validate_train(cfg)


@pytest.mark.parametrize("bound", [-1, 2.5, True])
def test_the_packers_refuse_a_bound_that_is_not_a_count(bound):
    stream = line_stream([1, 2, 1])
    with pytest.raises(ValueError, match=r"data.max_segments must be an int >= 0"):
        PackedLMBatches(stream, batch_size=1, seq_len=8, seed=0, max_segments=bound)
    with pytest.raises(ValueError, match=r"data.max_segments must be an int >= 0"):
        PackedSeq2SeqBatches([np.array([10])] * 2, [np.array([11])] * 2, 1, 8, 0, max_segments=bound)
