"""The batch plan: one choice of batcher per split, and a spec (keys, dtypes, rows, length) that
is what the batchers it chooses give, for training and for evaluation."""

import numpy as np
import pytest

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.data.batching.token_budget import TokenBudgetBatches
from seqjax.training.core.experiment import batch_plan, build_experiment

SMALL = [
    "data.num_train=200",
    "data.num_eval=20",
    "data.seq_len=24",
    "train.batch_size=4",
    "model.d_model=16",
    "model.layers=1",
]
ATTENTION = ["model.num_heads=2", "model.d_ff=32", "model.max_len=64"]
SEQ2SEQ = ["data.task=reverse", "model.kind=transformer_seq2seq", *ATTENTION]
CASES = {
    "lm": [*ATTENTION],
    "packed_lm": [*ATTENTION, "data.packing=true"],
    "lines": ["model.kind=rnn_vae", "objective.kind=vae", "data.seq_len=128"],
    "seq2seq": SEQ2SEQ,
    "packed_seq2seq": [*SEQ2SEQ, "data.packing=true"],
}


def small_config(*overrides: str) -> Config:
    return config_lib.override(Config(), [*SMALL, *overrides])


@pytest.fixture(scope="module", params=list(CASES))
def run(request):
    cfg = small_config(*CASES[request.param])
    return request.param, cfg, build_experiment(cfg)


def assert_fits(spec, batch):
    """The spec has the batch's keys and dtypes, its rows, and a length no shorter (the longest bucket)."""
    assert set(spec) == set(batch)
    for key, ((rows, length), dtype) in spec.items():
        assert dtype == batch[key].dtype, key
        assert rows == batch[key].shape[0] and length >= batch[key].shape[1], key


def test_the_train_spec_is_what_the_train_batcher_gives(run):
    _, cfg, exp = run
    assert_fits(batch_plan(cfg).spec("train"), exp.train_batches().batch(0))


def test_the_eval_spec_is_what_the_eval_batches_give(run):
    _, cfg, exp = run
    assert_fits(batch_plan(cfg).spec("valid"), next(batch_plan(cfg).eval(exp.data, "valid")))


def test_packed_lm_rows_are_evaluated_packed_and_packed_pairs_unpacked(run):
    name, cfg, _ = run
    packed = {"segment_ids", "positions"} <= set(batch_plan(cfg).keys("valid"))
    assert packed == (name == "packed_lm")


def test_the_example_batch_has_the_unpacked_keys_in_one_row_of_two_positions(run):
    name, cfg, _ = run
    example = batch_plan(cfg).example()
    expected = {"inputs", "targets", "mask"} | ({"src", "src_mask"} if "seq2seq" in name else set())
    assert set(example) == expected
    assert all(value.shape == (1, 2) for value in example.values())
    assert example["mask"].min() == 1.0  # no row fully masked while the parameters are made


def test_a_token_budget_spec_has_the_rows_its_batcher_gives_a_full_longest_bucket():
    cfg = small_config(*SEQ2SEQ, "data.max_tokens=1000")
    spec = batch_plan(cfg).spec("train", row_multiple=2)
    rng = np.random.default_rng(0)
    pairs = [rng.integers(4, 9, size=60) for _ in range(40)]  # every pair in bucket 64
    batches = TokenBudgetBatches(pairs, pairs, 1000, cfg.data.buckets, seed=0, row_multiple=2)
    assert spec["src"][0] == (batches.rows_per_batch[-1], 64) == (14, 64)  # 1000 // 64 = 15, down to a multiple of 2


def test_a_token_budget_too_small_for_the_longest_bucket_is_refused():
    plan = batch_plan(small_config(*SEQ2SEQ, "data.max_tokens=100"))
    with pytest.raises(ValueError, match="data.max_tokens=100 is smaller than the 64 padded positions"):
        plan.spec("train", row_multiple=2)
