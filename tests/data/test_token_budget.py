"""Token-budget seq2seq batches (data.max_tokens): within the budget, every pair once per
epoch, deterministic, split over two shards; a budget too small for the longest pair, or set for
data that are not unpacked sentence pairs, refused."""

import numpy as np
import pytest
from grain.sharding import ShardOptions

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.data.batching.loader import Loader, shard_rows
from seqjax.data.batching.token_budget import TokenBudgetBatches
from seqjax.training.core.experiment import validate_train

BUCKETS, BUDGET = (8, 16, 32), 96


def pairs(count=150, seed=0):
    """Pair i's source and target hold only id i + 4 (past the specials), so a row names its pair."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 31, size=(count, 2))
    src = [np.full(a, i + 4, np.int32) for i, (a, _) in enumerate(lengths)]
    tgt = [np.full(b, i + 4, np.int32) for i, (_, b) in enumerate(lengths)]
    return src, tgt


def pair_ids(batch):
    rows = batch["mask"][:, 0] > 0
    return list(batch["src"][rows, 0] - 4)


def test_batches_keep_to_the_budget_in_one_shape_per_bucket_and_hold_every_pair_once_per_epoch():
    src, tgt = pairs()
    batches = TokenBudgetBatches(src, tgt, BUDGET, BUCKETS, seed=0, row_multiple=2)
    # 96 // L rows in multiples of 2; bucket 8 holds 7 pairs, so 8 rows, not 12, take them all.
    assert [len(m) for m in batches.members] == [7, 25, 118]
    assert batches.shapes == [(8, 8), (6, 16), (2, 32)]
    for epoch in range(2):
        seen = []
        for index in range(epoch * batches.batches_per_epoch, (epoch + 1) * batches.batches_per_epoch):
            batch = batches.batch(index)
            assert batch["mask"].shape in batches.shapes and batch["mask"].size <= BUDGET
            assert all(v.shape == batch["mask"].shape for v in batch.values())
            seen += pair_ids(batch)
        assert sorted(seen) == list(range(len(src)))


def test_the_order_depends_on_the_seed_only_and_two_shards_make_up_each_batch():
    src, tgt = pairs()
    first, again = (TokenBudgetBatches(src, tgt, BUDGET, BUCKETS, seed=3, row_multiple=2) for _ in range(2))
    other = TokenBudgetBatches(src, tgt, BUDGET, BUCKETS, seed=4, row_multiple=2)
    steps = first.batches_per_epoch + 3
    loaders = [Loader(first, steps, rows=shard_rows(first.batch_size, ShardOptions(i, 2))) for i in range(2)]
    differs = False
    for index in range(steps):
        whole = first.batch(index)
        for name, value in whole.items():
            np.testing.assert_array_equal(value, again.batch(index)[name])
        halves = [next(loader) for loader in loaders]
        assert [loader.global_rows(half) for loader, half in zip(loaders, halves)] == [len(whole["mask"])] * 2
        for name, value in whole.items():
            np.testing.assert_array_equal(np.concatenate([half[name] for half in halves]), value)
        differs |= pair_ids(whole) != pair_ids(other.batch(index))
    assert differs


def test_a_budget_smaller_than_the_longest_pair_is_refused_naming_it():
    src, tgt = pairs()
    with pytest.raises(ValueError, match=r"data.max_tokens=31 is smaller than the 32 padded positions"):
        TokenBudgetBatches(src, tgt, 31, BUCKETS, seed=0)
    with pytest.raises(ValueError, match=r"data.max_tokens=40 .* times the 2 parts"):
        TokenBudgetBatches(src, tgt, 40, BUCKETS, seed=0, row_multiple=2)
    with pytest.raises(ValueError, match=r"data.max_tokens must be an int >= 1, got 0"):
        TokenBudgetBatches(src, tgt, 0, BUCKETS, seed=0)


@pytest.mark.parametrize(
    "keys", [["model.kind=transformer"], ["model.kind=transformer_seq2seq", "data.task=reverse", "data.packing=true"]]
)
def test_a_token_budget_outside_unpacked_pairs_is_refused_before_any_data_is_read(keys):
    cfg = config_lib.override(Config(), ["data.max_tokens=512", *keys])
    with pytest.raises(ValueError, match="data.max_tokens=512 fills batches of sentence pairs by length bucket"):
        validate_train(cfg)
