"""Rows of one line each (the VAE LM's unit): every row a whole line from its start, padding masked,
lines longer than the row refused."""

import numpy as np
import pytest

from seqjax.data.batching.line_rows import LineBatches, line_eval_batches
from seqjax.data.tokenizers.vocab import EOS_ID, PAD_ID

E, P = EOS_ID, PAD_ID
# Three lines: [5 6 7], [8], [9 10]; each followed by its `</s>`.
STREAM = np.array([5, 6, 7, E, 8, E, 9, 10, E], np.int32)
ROWS = {  # line -> (inputs, targets, mask) in a row of 5 slots
    0: ([E, 5, 6, 7, P], [5, 6, 7, E, P], [1, 1, 1, 1, 0]),
    1: ([E, 8, P, P, P], [8, E, P, P, P], [1, 1, 0, 0, 0]),
    2: ([E, 9, 10, P, P], [9, 10, E, P, P], [1, 1, 1, 0, 0]),
}


def test_every_training_row_is_one_whole_line_from_its_start_with_the_padding_masked():
    lines = LineBatches(STREAM, batch_size=3, seq_len=5, seed=4)
    batch = lines.batch(0)
    got = sorted(zip(batch["inputs"].tolist(), batch["targets"].tolist(), batch["mask"].tolist()))
    assert got == sorted((list(i), list(t), list(map(float, m))) for i, t, m in ROWS.values())


def test_eval_batches_hold_every_line_once_in_order_then_padding_rows():
    batches = list(line_eval_batches(STREAM, batch_size=2, seq_len=5, name="data.valid"))
    assert len(batches) == 2
    rows = [row for b in batches for row in zip(b["inputs"].tolist(), b["targets"].tolist(), b["mask"].tolist())]
    assert rows[:3] == [(list(i), list(t), list(map(float, m))) for i, t, m in ROWS.values()]
    assert rows[3] == ([P] * 5, [P] * 5, [0.0] * 5)


def test_a_line_longer_than_the_row_is_refused_naming_the_longest():
    with pytest.raises(ValueError, match=r"data.valid has 1 line\(s\) longer than data.seq_len=3 tokens .*holds 4"):
        next(line_eval_batches(STREAM, batch_size=2, seq_len=3, name="data.valid"))


def test_epochs_visit_every_line_in_a_seeded_order():
    lines = LineBatches(STREAM, batch_size=1, seq_len=5, seed=4)
    firsts = [lines.batch(i)["targets"][0, 0] for i in range(3)]
    assert sorted(firsts) == [5, 8, 9]
    assert [LineBatches(STREAM, 1, 5, seed=4).batch(i)["targets"][0, 0] for i in range(3)] == firsts
