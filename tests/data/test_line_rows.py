"""Rows of one line each (the VAE LM's unit): every row a whole line from its start, padding masked,
lines longer than the row refused."""

import numpy as np
import pytest

from seqjax.data.line_rows import LineBatches, line_eval_batches
from seqjax.data.vocab import EOS_ID, PAD_ID

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


def reference_rows(stream, seq_len):
    """Each line's row from the rule, one line at a time: the line is its tokens and the `</s>`
    after them (a last line without one, its tokens); inputs `</s>` then the line but its last
    token, targets the line, padded to seq_len with `<pad>` and mask 0."""
    lines, line = [], []
    for token in stream.tolist():
        line.append(token)
        if token == E:
            lines.append(line)
            line = []
    if line:
        lines.append(line)
    rows = []
    for line in lines:
        pad = [P] * (seq_len - len(line))
        rows.append(([E] + line[:-1] + pad, line + pad, [1.0] * len(line) + [0.0] * len(pad)))
    return rows


def as_rows(batch):
    return list(zip(batch["inputs"].tolist(), batch["targets"].tolist(), batch["mask"].tolist()))


@pytest.mark.parametrize(
    "stream",
    [
        [5, 6, 7, E, 8, E, 9, 10, E],
        [5, E, E, 6, E],  # an empty line: a row that predicts its `</s>` alone
        [5, 6, E, 7, 8],  # the last line without its `</s>`
        [E, E, 4, 4, 4, 4, E],  # two empty lines first; a line of exactly seq_len tokens with its `</s>`
    ],
)
def test_the_rows_of_every_line_follow_the_rule(stream):
    stream = np.array(stream, np.int32)
    lines = LineBatches(stream, batch_size=1, seq_len=5, seed=0)
    expected = reference_rows(stream, 5)
    assert lines.num_rows == len(expected)
    assert as_rows(lines.rows(np.arange(lines.num_rows))) == expected


def test_a_line_of_exactly_the_row_length_fits_and_one_token_more_does_not():
    stream = np.array([5, 6, 7, E, 8, E], np.int32)  # the longest line holds 4 tokens with its `</s>`
    assert as_rows(next(line_eval_batches(stream, 2, seq_len=4, name="data.valid")))[0] == (
        [E, 5, 6, 7],
        [5, 6, 7, E],
        [1.0] * 4,
    )
    with pytest.raises(ValueError, match=r"data.train has 1 line\(s\) longer than data.seq_len=3 .*holds 4"):
        LineBatches(stream, batch_size=1, seq_len=3, seed=0)


@pytest.mark.parametrize("batch_size, batches, padding", [(3, 1, 0), (1, 3, 0), (4, 1, 1), (2, 2, 1)])
def test_eval_batches_score_every_line_once_and_pad_only_the_last(batch_size, batches, padding):
    got = list(line_eval_batches(STREAM, batch_size, seq_len=5, name="data.valid"))
    rows = [row for batch in got for row in as_rows(batch)]
    assert len(got) == batches and all(b["inputs"].shape == (batch_size, 5) for b in got)
    assert rows == reference_rows(STREAM, 5) + [([P] * 5, [P] * 5, [0.0] * 5)] * padding


def test_a_padding_row_among_chosen_lines_is_all_padding():
    lines = LineBatches(STREAM, batch_size=1, seq_len=5, seed=0)
    assert as_rows(lines.rows(np.array([2, -1, 0]))) == [
        reference_rows(STREAM, 5)[2],
        ([P] * 5, [P] * 5, [0.0] * 5),
        reference_rows(STREAM, 5)[0],
    ]


def test_each_epoch_visits_every_line_once_when_the_batches_divide_them():
    stream = np.array([t for line in range(6) for t in (10 + line, E)], np.int32)  # six lines of one token
    lines = LineBatches(stream, batch_size=2, seq_len=3, seed=1)
    assert lines.batches_per_epoch == 3
    for epoch in range(2):
        firsts = [lines.batch(3 * epoch + i)["targets"][:, 0].tolist() for i in range(3)]
        assert sorted(t for batch in firsts for t in batch) == list(range(10, 16))


def test_fewer_lines_than_a_batch_are_refused_and_as_many_are_one_batch_an_epoch():
    assert LineBatches(STREAM, batch_size=3, seq_len=5, seed=0).batches_per_epoch == 1
    with pytest.raises(ValueError, match="stream must hold at least batch_size=4 lines, got 3"):
        LineBatches(STREAM, batch_size=4, seq_len=5, seed=0)
