"""LM batches: shifted windows of the stream, epochs as permutations, exact resume, exact eval."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.data.batching import LMBatches, lm_eval_batches
from seqjax.data.tokenizers.vocab import EOS_ID, PAD_ID


def test_targets_are_inputs_shifted_by_one_window_of_the_stream():
    stream = np.arange(100, dtype=np.int32)
    batch = LMBatches(stream, batch_size=4, seq_len=6, seed=0).batch(3)
    assert batch["inputs"].shape == batch["targets"].shape == batch["mask"].shape == (4, 6)
    assert batch["inputs"].dtype == np.int32 and batch["mask"].dtype == np.float32
    for inputs, targets in zip(batch["inputs"], batch["targets"]):
        assert inputs[0] % 6 == 0
        np.testing.assert_array_equal(inputs, np.arange(inputs[0], inputs[0] + 6))
        np.testing.assert_array_equal(targets, inputs + 1)
    np.testing.assert_array_equal(batch["mask"], 1.0)


def test_an_epoch_visits_a_permutation_of_the_rows():
    batches = LMBatches(np.arange(97, dtype=np.int32), batch_size=4, seq_len=4, seed=1)
    assert batches.num_rows == 24 and batches.batches_per_epoch == 6
    for epoch in range(2):
        starts = [row[0] // 4 for i in range(epoch * 6, (epoch + 1) * 6) for row in batches.batch(i)["inputs"]]
        assert sorted(starts) == list(range(24))


def test_epochs_are_shuffled_differently():
    batches = LMBatches(np.arange(97, dtype=np.int32), batch_size=4, seq_len=4, seed=1)
    first = np.concatenate([batches.batch(i)["inputs"][:, 0] for i in range(6)])
    second = np.concatenate([batches.batch(i)["inputs"][:, 0] for i in range(6, 12)])
    assert not np.array_equal(first, second)


def test_batch_depends_only_on_index_so_resume_is_exact():
    stream = np.random.default_rng(0).integers(0, 50, size=500).astype(np.int32)
    run = LMBatches(stream, batch_size=3, seq_len=7, seed=5)
    drawn = [run.batch(i)["inputs"] for i in range(40)]
    resumed = LMBatches(stream, batch_size=3, seq_len=7, seed=5)
    for i in (39, 17, 0, 23):
        np.testing.assert_array_equal(resumed.batch(i)["inputs"], drawn[i])


def test_stream_too_short_for_one_batch_names_sizes():
    with pytest.raises(ValueError, match=r"batch_size=4 rows of seq_len\+1=6 tokens.*got 20 tokens \(3 rows\)"):
        LMBatches(np.arange(20, dtype=np.int32), batch_size=4, seq_len=5, seed=0)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"batch_size": 0}, "batch_size must be an int >= 1"), ({"seq_len": 0}, "seq_len must be an int >= 1")],
)
def test_non_positive_sizes_are_refused(kwargs, message):
    arguments = {"batch_size": 2, "seq_len": 2, "seed": 0} | kwargs
    with pytest.raises(ValueError, match=message):
        LMBatches(np.arange(50, dtype=np.int32), **arguments)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 60), st.integers(1, 4), st.integers(1, 6))
def test_eval_batches_target_every_token_once_in_order(n, batch_size, seq_len):
    stream = np.arange(10, 10 + n, dtype=np.int32)
    batches = list(lm_eval_batches(stream, batch_size, seq_len))
    assert all(b["inputs"].shape == (batch_size, seq_len) for b in batches)
    mask = np.concatenate([b["mask"].reshape(-1) for b in batches])
    targets = np.concatenate([b["targets"].reshape(-1) for b in batches])
    inputs = np.concatenate([b["inputs"].reshape(-1) for b in batches])
    np.testing.assert_array_equal(targets[mask == 1], stream)
    np.testing.assert_array_equal(inputs[mask == 1], np.concatenate([[EOS_ID], stream[:-1]]))
    assert np.all(targets[mask == 0] == PAD_ID) and len(mask) - n < batch_size * seq_len
