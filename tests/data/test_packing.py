"""Packed batches: whole lines (pairs) per segment, every target once, per-segment positions,
exact resume, and a packed row's loss equal to its segments' losses computed alone."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax import config as config_lib
from seqjax.config import Config, ModelConfig
from seqjax.data.batching.packing import (
    PackedLMBatches,
    PackedSeq2SeqBatches,
    best_fit_decreasing,
    packed_lm_eval_batches,
)
from seqjax.data.tokenizers.vocab import BOS_ID, EOS_ID, PAD_ID
from seqjax.heads import build_head
from seqjax.model_head import hidden_states, init_params, token_nll
from seqjax.models import build_model
from seqjax.training.core.experiment import build_experiment, validate_train


def line_stream(lengths, first_id=10):
    """Line k is the tokens first_id + k repeated lengths[k] times, then `</s>`."""
    return np.concatenate([np.append(np.full(n, first_id + k, np.int32), EOS_ID) for k, n in enumerate(lengths)])


LENGTHS = [3, 0, 7, 2, 12, 5, 1, 4, 6, 3, 2, 9]  # with `</s>`: 4, 1, 8, ..., and 13 > T is cut
T = 8


def segments_of(batch, row):
    """{segment id: slot indices} of one row, padding (0) left out."""
    ids = batch["segment_ids"][row]
    return {int(k): np.flatnonzero(ids == k) for k in np.unique(ids) if k}


def all_rows(batches):
    """Every row of an epoch, stacked (all rows when batch_size divides them)."""
    epoch = [batches.batch(i) for i in range(batches.batches_per_epoch)]
    return {key: np.concatenate([batch[key] for batch in epoch]) for key in epoch[0]}


def test_best_fit_decreasing_fills_rows_tightly():
    row, offset, segment = best_fit_decreasing(np.array([2, 6, 3, 4, 3, 2]), 10)
    assert row.max() + 1 == 2
    for r in range(2):
        pieces = np.flatnonzero(row == r)
        ends = sorted(zip(offset[pieces], offset[pieces] + np.array([2, 6, 3, 4, 3, 2])[pieces]))
        assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:])) and ends[-1][1] <= 10
        assert sorted(segment[pieces]) == list(range(1, len(pieces) + 1))


def test_every_target_of_the_stream_is_in_exactly_one_slot():
    stream = line_stream(LENGTHS)
    batches = PackedLMBatches(stream, batch_size=2, seq_len=T, seed=0)
    assert sorted(batches.pairs[batches.pairs >= 0].tolist()) == list(range(len(stream)))
    assert batches.fill == len(stream) / (batches.num_rows * T)


def test_segments_are_whole_lines_after_their_eos_context_or_seq_len_pieces_of_longer_ones():
    rows = all_rows(PackedLMBatches(line_stream(LENGTHS), batch_size=1, seq_len=T, seed=0))
    found = []
    for r in range(len(rows["inputs"])):
        for slots in segments_of(rows, r).values():
            np.testing.assert_array_equal(slots, np.arange(slots[0], slots[0] + len(slots)))  # contiguous
            np.testing.assert_array_equal(rows["positions"][r, slots], np.arange(len(slots)))
            np.testing.assert_array_equal(rows["inputs"][r, slots[1:]], rows["targets"][r, slots[:-1]])
            found.append((int(rows["inputs"][r, slots[0]]), rows["targets"][r, slots].tolist()))
        padding = rows["segment_ids"][r] == 0
        assert np.all(rows["mask"][r] == ~padding) and np.all(rows["inputs"][r, padding] == PAD_ID)
    expected = []
    for k, n in enumerate(LENGTHS):
        line = [10 + k] * n + [EOS_ID]
        contexts = [EOS_ID] + line[T - 1 :: T]  # a piece after the first is fed the token before it
        expected += [(contexts[i], line[start : start + T]) for i, start in enumerate(range(0, len(line), T))]
    assert sorted(found) == sorted(expected)


def test_packed_eval_batches_score_every_target_once_each_line_from_its_own_start():
    stream = line_stream(LENGTHS)
    packed = PackedLMBatches(stream, batch_size=1, seq_len=T, seed=0)
    batches = list(packed_lm_eval_batches(stream, batch_size=4, seq_len=T))
    assert len(batches) == -(-packed.num_rows // 4) and packed.num_rows % 4  # the last batch is filled up
    rows = {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}
    real = rows["mask"] > 0
    assert np.array_equal(np.sort(rows["targets"][real]), np.sort(stream))
    assert not real[packed.num_rows :].any() and (rows["segment_ids"][~real] == 0).all()
    training = all_rows(packed)  # the same rows as training packs them, here in order
    order = [
        next(j for j in range(packed.num_rows) if np.array_equal(training["targets"][j], t))
        for t in rows["targets"][: packed.num_rows]
    ]
    assert sorted(order) == list(range(packed.num_rows))
    for key in training:
        np.testing.assert_array_equal(rows[key][: packed.num_rows], training[key][order], err_msg=key)
    starts = real & (rows["positions"] == 0)
    assert (rows["inputs"][starts] == EOS_ID).sum() == len(LENGTHS)  # every line opens on its `</s>` context


def test_batches_are_a_pure_function_of_index_and_rows_select_part_of_a_batch():
    batches = PackedLMBatches(line_stream(LENGTHS * 3), batch_size=4, seq_len=T, seed=3)
    again = PackedLMBatches(line_stream(LENGTHS * 3), batch_size=4, seq_len=T, seed=3)
    for index in (0, 1, batches.batches_per_epoch + 1):
        whole = batches.batch(index)
        part = again.batch(index, rows=[(2, 4), (0, 1)])
        for key, value in whole.items():
            np.testing.assert_array_equal(part[key], value[[2, 3, 0]])
    assert not np.array_equal(batches.batch(0)["inputs"], batches.batch(batches.batches_per_epoch)["inputs"])


def test_too_few_rows_are_refused():
    with pytest.raises(ValueError, match="must pack into at least batch_size=50 rows"):
        PackedLMBatches(line_stream(LENGTHS), batch_size=50, seq_len=T, seed=0)


TINY = ModelConfig(kind="transformer", d_model=16, layers=2, num_heads=4, d_ff=32, dropout=0.0, max_len=T)
V = 40


def sum_of_losses(model, head, params, batch):
    hidden = hidden_states(model, params, batch, jax.random.key(0), train=False)
    return token_nll(model, head, params, hidden, jnp.asarray(batch["targets"])) * batch["mask"]


@pytest.mark.parametrize(
    "changes", [dict(positions="rope", norm_type="rmsnorm", mlp="swiglu", kv_heads=2, bias=False), dict()]
)
def test_packed_row_loss_equals_the_sum_of_its_segments_losses_computed_alone(changes):
    model = build_model(dataclasses.replace(TINY, **changes), V)
    head = build_head(config_lib.HeadConfig(kind="full"), V, np.ones(V, np.int64))
    batches = PackedLMBatches(line_stream([3, 0, 2, 5, 1, 2, 6]), batch_size=2, seq_len=T, seed=0)
    batch = batches.batch(0)
    params = init_params(model, head, jax.random.key(1), batch)
    losses = jax.jit(lambda b: sum_of_losses(model, head, params, b))
    packed = losses(batch)
    # Each segment alone: at the start of a row of its own, the rest of the row masked padding
    # (a causal model's outputs at the segment's slots cannot see it).
    pieces = [(row, slots) for row in range(2) for slots in segments_of(batch, row).values()]
    alone = {key: np.zeros((len(pieces), T), batch[key].dtype) for key in ("inputs", "targets", "mask")}
    for i, (row, slots) in enumerate(pieces):
        for key in alone:
            alone[key][i, : len(slots)] = batch[key][row, slots]
    alone_losses = losses(alone)
    for i, (row, slots) in enumerate(pieces):
        np.testing.assert_allclose(packed[row, slots], alone_losses[i, : len(slots)], rtol=1e-5, atol=1e-5)
    assert len(pieces) > 2 and all(float(packed[row].sum()) > 0 for row in range(2))


def pairs(n=30, seed=0):
    rng = np.random.default_rng(seed)
    src = [np.full(rng.integers(1, 7), 10 + i, np.int32) for i in range(n)]
    tgt = [np.full(rng.integers(0, 7), 10 + n + i, np.int32) for i in range(n)]
    return src, tgt


def test_packed_pairs_keep_each_example_whole_with_its_own_positions():
    src, tgt = pairs()
    batches = PackedSeq2SeqBatches(src, tgt, batch_size=2, length=12, seed=0)
    seen = []
    for index in range(batches.batches_per_epoch):
        batch = batches.batch(index)
        assert batch["src"].shape == batch["inputs"].shape == (2, 12)
        for row in range(2):
            src_ids, tgt_ids = batch["src_segment_ids"][row], batch["segment_ids"][row]
            for k in set(tgt_ids[tgt_ids > 0].tolist()):
                source, target = batch["src"][row, src_ids == k], batch["targets"][row, tgt_ids == k]
                example = int(source[0]) - 10
                np.testing.assert_array_equal(source, np.append(src[example], EOS_ID))
                np.testing.assert_array_equal(target, np.append(tgt[example], EOS_ID))
                np.testing.assert_array_equal(batch["inputs"][row, tgt_ids == k], np.append(BOS_ID, tgt[example]))
                np.testing.assert_array_equal(batch["positions"][row, tgt_ids == k], np.arange(len(target)))
                np.testing.assert_array_equal(batch["src_positions"][row, src_ids == k], np.arange(len(source)))
                seen.append(example)
            np.testing.assert_array_equal(batch["mask"][row], tgt_ids > 0)
    assert len(seen) == len(set(seen)) and len(seen) >= len(src) - 2 * 12


def test_packed_pair_loss_equals_each_pair_computed_alone():
    cfg = dataclasses.replace(TINY, kind="transformer_seq2seq", positions="rope", kv_heads=1, max_len=12)
    model = build_model(cfg, V, src_vocab_size=V)
    head = build_head(config_lib.HeadConfig(kind="full"), V, np.ones(V, np.int64))
    src, tgt = pairs(n=8)
    src, tgt = [s % V for s in src], [t % V for t in tgt]
    batch = PackedSeq2SeqBatches(src, tgt, batch_size=1, length=12, seed=0).batch(0)
    params = init_params(model, head, jax.random.key(1), batch)
    losses = jax.jit(lambda b: sum_of_losses(model, head, params, b))
    packed = losses(batch)
    # Each pair alone, at the start of a row of its own: source padding masked out of attention,
    # decoder padding after the target (unseen by its causal outputs) masked out of the loss.
    segments = sorted(set(batch["segment_ids"][0][batch["segment_ids"][0] > 0].tolist()))
    alone = {
        key: np.zeros((len(segments), 12), batch[key].dtype) for key in ("src", "src_mask", "inputs", "targets", "mask")
    }
    for i, k in enumerate(segments):
        source, target = batch["src_segment_ids"][0] == k, batch["segment_ids"][0] == k
        alone["src"][i, : source.sum()] = batch["src"][0, source]
        alone["src_mask"][i, : source.sum()] = 1.0
        for key in ("inputs", "targets", "mask"):
            alone[key][i, : target.sum()] = batch[key][0, target]
    alone_losses = losses(alone)
    for i, k in enumerate(segments):
        target = batch["segment_ids"][0] == k
        np.testing.assert_allclose(packed[0, target], alone_losses[i, : target.sum()], rtol=1e-5, atol=1e-5)
    assert len(segments) > 1


def packing_config(*overrides):
    return config_lib.override(
        Config(), ["data.num_train=200", "data.num_eval=20", "train.batch_size=4", "data.packing=true", *overrides]
    )


def test_experiment_trains_on_packed_batches():
    exp = build_experiment(packing_config("data.seq_len=128", "model.max_len=128"))
    batch = exp.train_batches().batch(0)
    assert set(batch) == {"inputs", "targets", "mask", "segment_ids", "positions"}
    assert batch["inputs"].shape == (4, 128) and batch["segment_ids"].max() > 1


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.kind=rnn"], "data.packing needs a Transformer .*got model.kind='rnn'"),
        (["objective.kind=scheduled_sampling"], "data.packing needs an objective feeding gold tokens only"),
    ],
)
def test_packing_is_refused_for_models_and_objectives_that_would_mix_segments(overrides, message):
    with pytest.raises(ValueError, match=message):
        validate_train(packing_config(*overrides))
