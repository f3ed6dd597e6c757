"""Row-selected batches, what one process of a multi-process run builds: `batch(i, rows)`
equals those rows of the whole batch i, for LM and seq2seq batches, and bad selections are
refused on the host."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.data.batching import LMBatches, Seq2SeqBatches


@st.composite
def row_ranges(draw, batch_size):
    """A non-empty list of [start, stop) ranges of a batch of batch_size rows, in any order."""
    spans = []
    for _ in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, batch_size - 1))
        spans.append((start, draw(st.integers(start + 1, batch_size))))
    return spans


def assert_rows_of(whole, selected, rows):
    assert selected.keys() == whole.keys()
    for name, value in whole.items():
        want = np.concatenate([value[start:stop] for start, stop in rows])
        assert selected[name].dtype == want.dtype
        np.testing.assert_array_equal(selected[name], want)


def lm_batches(seed):
    stream = np.random.default_rng(seed).integers(0, 50, 200).astype(np.int32)
    return LMBatches(stream, batch_size=6, seq_len=4, seed=seed)  # 49 rows: 8 batches an epoch


def seq2seq_batches(seed):
    """60 examples of 1–15 source tokens and at most as many target tokens, spread evenly
    over the buckets (4, 8, 12, 16) by the source length."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 16, 60)
    src = [rng.integers(4, 50, n).astype(np.int32) for n in lengths]
    tgt = [rng.integers(4, 50, rng.integers(0, n + 1)).astype(np.int32) for n in lengths]
    return Seq2SeqBatches(src, tgt, batch_size=4, buckets=(4, 8, 12, 16), seed=seed)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3 * 8 - 1), st.integers(0, 3), st.data())
def test_lm_selected_rows_equal_those_rows_of_the_whole_batch(index, seed, data):
    batches = lm_batches(seed)
    rows = data.draw(row_ranges(batches.batch_size))
    assert_rows_of(batches.batch(index), batches.batch(index, rows=rows), rows)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 60), st.integers(0, 3), st.data())
def test_seq2seq_selected_rows_equal_those_rows_of_the_whole_batch(index, seed, data):
    batches = seq2seq_batches(seed)
    rows = data.draw(row_ranges(batches.batch_size))
    assert_rows_of(batches.batch(index), batches.batch(index, rows=rows), rows)


def test_seq2seq_rows_of_one_batch_share_its_bucket_whichever_rows_are_chosen():
    """Two processes' halves of batch i have the length of the whole batch, in every bucket."""
    batches = seq2seq_batches(0)
    lengths = set()
    for index in range(2 * batches.batches_per_epoch):
        length = batches.batch(index)["src"].shape[1]
        halves = [batches.batch(index, rows=[span]) for span in ((0, 2), (2, 4))]
        assert all(half[name].shape == (2, length) for half in halves for name in half)
        lengths.add(length)
    assert lengths == {4, 8, 12, 16}


BAD_ROWS = [[], [(2, 2)], [(3, 1)], [(0, 7)], [(-1, 2)], [(0, 1, 2)], [(0.0, 1)], [(False, 2)], "01", (0, 2)]


@pytest.mark.parametrize("make", [lm_batches, seq2seq_batches], ids=["lm", "seq2seq"])
@pytest.mark.parametrize("rows", BAD_ROWS, ids=repr)
def test_bad_row_selections_are_refused_naming_the_value(make, rows):
    batches = make(0)
    rule = rf"0 <= start < stop <= batch_size={batches.batch_size}, got {re.escape(repr(rows))}"
    with pytest.raises(ValueError, match=rule):
        batches.batch(0, rows=rows)
