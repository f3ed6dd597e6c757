"""Seq2seq batches: fixed bucket shapes, BOS/EOS placement, masks, exact resume, full eval."""

import numpy as np
import pytest

from seqjax.data.batching import Seq2SeqBatches, seq2seq_eval_batches
from seqjax.data.tokenizers.vocab import BOS_ID, EOS_ID, PAD_ID

BUCKETS = (4, 8, 12)


def _examples(n=60, seed=0):
    """Example i's source is [i + 10] * len (len >= 1) and its target [i + 10 + n] * len' (len' >= 0),
    so that a row names its example."""
    rng = np.random.default_rng(seed)
    src = [np.full(rng.integers(1, 14), i + 10, np.int32) for i in range(n)]
    tgt = [np.full(rng.integers(0, 14), i + 10 + n, np.int32) for i in range(n)]
    return src, tgt


def _example_of(batch, row):
    return int(batch["src"][row, 0]) - 10


def _check_row(batch, row, source, target):
    s, t = len(source), len(target)
    np.testing.assert_array_equal(batch["src"][row, :s], source)
    assert batch["src"][row, s] == EOS_ID and np.all(batch["src"][row, s + 1 :] == PAD_ID)
    np.testing.assert_array_equal(batch["src_mask"][row], np.arange(batch["src"].shape[1]) <= s)
    assert batch["inputs"][row, 0] == BOS_ID
    np.testing.assert_array_equal(batch["inputs"][row, 1 : t + 1], target)
    np.testing.assert_array_equal(batch["targets"][row, :t], target)
    assert batch["targets"][row, t] == EOS_ID and np.all(batch["targets"][row, t + 1 :] == PAD_ID)
    np.testing.assert_array_equal(batch["mask"][row], np.arange(batch["inputs"].shape[1]) <= t)


def _smallest_bucket(source, target, buckets):
    return min(b for b in buckets if max(len(source), len(target)) + 1 <= b)


def test_batches_have_bucket_shapes_and_each_row_is_its_example():
    src, tgt = _examples()
    batches = Seq2SeqBatches(src, tgt, batch_size=4, buckets=BUCKETS, seed=0)
    for i in range(batches.batches_per_epoch):
        batch = batches.batch(i)
        length = batch["src"].shape[1]
        assert length in BUCKETS
        assert all(batch[k].shape == (4, length) for k in batch)
        for row in range(4):
            example = _example_of(batch, row)
            _check_row(batch, row, src[example], tgt[example])
            assert length == _smallest_bucket(src[example], tgt[example], BUCKETS)


def test_examples_longer_than_largest_bucket_are_dropped_and_counted():
    src, tgt = _examples()
    too_long = sum(max(len(s), len(t)) + 1 > 8 for s, t in zip(src, tgt))
    batches = Seq2SeqBatches(src, tgt, batch_size=2, buckets=(4, 8), seed=0)
    assert batches.dropped == too_long > 0
    seen = {_example_of(batches.batch(i), r) for i in range(batches.batches_per_epoch) for r in range(2)}
    assert all(max(len(src[e]), len(tgt[e])) + 1 <= 8 for e in seen)


def test_an_epoch_draws_each_example_at_most_once_and_full_batches_per_bucket():
    src, tgt = _examples()
    batches = Seq2SeqBatches(src, tgt, batch_size=4, buckets=BUCKETS, seed=3)
    for epoch in range(2):
        drawn = [
            _example_of(batches.batch(epoch * batches.batches_per_epoch + i), r)
            for i in range(batches.batches_per_epoch)
            for r in range(4)
        ]
        assert len(drawn) == len(set(drawn)) == sum(len(m) // 4 * 4 for m in batches.members)


def test_batch_depends_only_on_index_so_resume_is_exact():
    src, tgt = _examples()
    run = Seq2SeqBatches(src, tgt, batch_size=4, buckets=BUCKETS, seed=2)
    drawn = [run.batch(i) for i in range(3 * run.batches_per_epoch)]
    resumed = Seq2SeqBatches(src, tgt, batch_size=4, buckets=BUCKETS, seed=2)
    for i in (len(drawn) - 1, 5, 0):
        for key, value in resumed.batch(i).items():
            np.testing.assert_array_equal(value, drawn[i][key])


@pytest.mark.parametrize(
    "buckets, message",
    [((8, 4), "strictly increasing"), ((), "non-empty"), ((1, 4), "ints >= 2")],
)
def test_bad_buckets_are_refused(buckets, message):
    src, tgt = _examples()
    with pytest.raises(ValueError, match=message):
        Seq2SeqBatches(src, tgt, batch_size=2, buckets=buckets, seed=0)


def test_mismatched_source_and_target_counts_are_refused():
    src, tgt = _examples()
    with pytest.raises(ValueError, match="equal lengths, got 60 and 59"):
        Seq2SeqBatches(src, tgt[:-1], batch_size=2, buckets=BUCKETS, seed=0)


def test_no_full_batch_in_any_bucket_is_refused():
    src, tgt = _examples(n=3)
    with pytest.raises(ValueError, match="some bucket must hold batch_size=8 examples"):
        Seq2SeqBatches(src, tgt, batch_size=8, buckets=BUCKETS, seed=0)


def test_eval_batches_cover_every_example_once_including_long_ones():
    src, tgt = _examples()
    seen = []
    for batch, indices in seq2seq_eval_batches(src, tgt, batch_size=4, buckets=(4, 8)):
        length = batch["src"].shape[1]
        assert length in (4, 8, 16) and indices.shape == (4,)
        for row, example in enumerate(indices):
            if example < 0:
                assert batch["mask"][row].sum() == 0 and batch["src_mask"][row].sum() == 1
                continue
            _check_row(batch, row, src[example], tgt[example])
            seen.append(int(example))
    assert sorted(seen) == list(range(len(src)))


def test_eval_batches_of_long_examples_are_no_longer_than_the_model_reads():
    src = [np.arange(3, 22, dtype=np.int32), np.arange(3, 6, dtype=np.int32)]  # 19 + </s>: 20 positions
    tgt = [np.arange(3, 5, dtype=np.int32)] * 2
    lengths = [batch["src"].shape[1] for batch, _ in seq2seq_eval_batches(src, tgt, 2, (4, 8), max_length=20)]
    assert lengths == [4, 20]  # not 24, the multiple of 8 the model could not read
    assert [batch["src"].shape[1] for batch, _ in seq2seq_eval_batches(src, tgt, 2, (4, 8))] == [4, 24]
