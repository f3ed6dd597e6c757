"""The Grain loader: the batchers' batches in order, a saved iterator state that resumes on the
very next batch, and process shards that split every batch into disjoint covering rows."""

import json

import numpy as np
import pytest
from grain.sharding import ShardOptions

from seqjax.data import LMBatches, Seq2SeqBatches
from seqjax.data.batching.loader import Loader, shard_rows


def _lm_batches():
    stream = np.random.default_rng(0).integers(0, 50, size=4000).astype(np.uint16)
    return LMBatches(stream, batch_size=8, seq_len=16, seed=3)


def _assert_equal(got, want):
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_the_loader_gives_the_batchers_batches_from_its_start():
    batches = _lm_batches()
    steps = batches.batches_per_epoch + 5  # into the second epoch
    loader = Loader(batches, steps, start=3)
    for index in range(3, steps):
        _assert_equal(next(loader), batches.batch(index))
    with pytest.raises(StopIteration):
        next(loader)


@pytest.mark.parametrize("kind", ["lm", "seq2seq"])
def test_a_restored_iterator_state_gives_the_next_batches_of_an_uninterrupted_run(kind):
    if kind == "lm":
        batches = _lm_batches()
    else:
        rng = np.random.default_rng(1)
        pairs = [rng.integers(4, 30, size=(2, rng.integers(1, 20))) for _ in range(300)]
        batches = Seq2SeqBatches([p[0] for p in pairs], [p[1] for p in pairs], 6, (8, 16, 32), 2)
    uninterrupted = Loader(batches, 40, start=2)
    for _ in range(7):
        next(uninterrupted)
    saved = json.loads(json.dumps(uninterrupted.state()))  # as the checkpoint's JSON holds it
    resumed = Loader.restore(batches, 40, saved)
    for index in range(9, 15):
        want = batches.batch(index)
        _assert_equal(next(uninterrupted), want)
        _assert_equal(next(resumed), want)


def test_two_process_shards_read_disjoint_rows_that_cover_the_batch():
    batches = _lm_batches()
    shards = [shard_rows(8, ShardOptions(shard_index=i, shard_count=2)) for i in range(2)]
    assert shards == [[(0, 4)], [(4, 8)]]
    parts = [next(Loader(batches, 10, start=6, rows=rows)) for rows in shards]
    for key, whole in batches.batch(6).items():
        np.testing.assert_array_equal(np.concatenate([part[key] for part in parts]), whole)
    assert shard_rows(8) == [(0, 8)]  # one JAX process reads every row


def test_a_batch_that_does_not_divide_over_the_processes_is_refused():
    with pytest.raises(ValueError, match="train.batch_size must divide over the 3 processes reading it, got 8"):
        shard_rows(8, ShardOptions(shard_index=0, shard_count=3))
