"""Rows of one line each, padded to a static length: the sentence as the unit of a VAE LM
(Bowman et al. 2016), whose encoder reads a whole sentence and whose decoder starts it afresh.

A line of the stream is its tokens and the `</s>` that ends it; its row has inputs `</s>`
(the end of the line before, as the first context of every LM row) then the line's tokens,
targets the line's tokens then its `</s>`, mask 1 on those n + 1 slots and `<pad>` with mask 0
after them. The rule for a line longer than the row: refused (`check_lines_fit`), never cut,
so that every sentence is read, scored and reconstructed whole. Epochs visit the rows in a
permutation drawn from (seed, epoch), as `LMBatches`, so `batch(i)` is a pure function of the
data, the seed and i.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from seqjax.data.batching.rows import Batch, RowRanges, ShuffledRows, check_positive, check_seed, check_stream
from seqjax.data.tokenizers.vocab import EOS_ID, PAD_ID


def line_spans(stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first token [L] int64, tokens with the `</s>` [L] int64) of each line of `stream` [n]
    (a last line without its `</s>` counts its tokens only)."""
    stream = check_stream(stream)
    ends = np.flatnonzero(stream == EOS_ID)
    if len(stream) and (not len(ends) or ends[-1] != len(stream) - 1):
        ends = np.append(ends, len(stream) - 1)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if len(ends) else ends.astype(np.int64)
    return starts, (ends + 1 - starts).astype(np.int64)


def check_lines_fit(stream: np.ndarray, seq_len: int, name: str) -> None:
    """Raises ValueError when a line of `stream` (called `name`, e.g. "data.valid") holds more
    than seq_len tokens with its `</s>`, naming how many do, the longest and the data.seq_len
    that would hold it."""
    _, lengths = line_spans(stream)
    if len(lengths) and lengths.max() > seq_len:
        raise ValueError(
            f"{name} has {int((lengths > seq_len).sum()):,} line(s) longer than data.seq_len={seq_len} "
            f"tokens with their </s> (the longest holds {int(lengths.max())}); a row holds one whole line: raise "
            f"data.seq_len to {int(lengths.max())} or leave them out"
        )


class LineBatches(ShuffledRows):
    """Training rows of one line each, [B, seq_len].

    Attributes:
      num_rows: the lines L of the stream; batches_per_epoch = L // batch_size.
    """

    def __init__(self, stream: np.ndarray, batch_size: int, seq_len: int, seed: int, name: str = "data.train"):
        self.stream = check_stream(stream)
        check_positive(batch_size, "batch_size")
        check_positive(seq_len, "seq_len")
        check_seed(seed)
        check_lines_fit(self.stream, seq_len, name)
        self.batch_size, self.seq_len, self.seed = batch_size, seq_len, seed
        self.starts, self.lengths = line_spans(self.stream)
        self.num_rows = len(self.starts)
        if self.num_rows < batch_size:
            raise ValueError(f"stream must hold at least batch_size={batch_size} lines, got {self.num_rows}")

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The [rows, length] of every batch: [B, seq_len]."""
        return [(self.batch_size, self.seq_len)]

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch:
        """The index-th batch, or only its row ranges `rows` (as `LMBatches.batch`): `rows`."""
        return self.rows(self.chosen(index, rows))

    def rows(self, chosen: np.ndarray) -> Batch:
        """The lines `chosen` [N] (indices in [0, L), -1 for an all-padding row) as a batch.

        Returns:
          inputs, targets [N, seq_len] int32 (`<pad>` after the line), mask [N, seq_len] float32
          (1 on the line's targets).
        """
        slots = np.arange(self.seq_len)
        lengths = np.where(chosen >= 0, self.lengths[chosen], 0)
        real = slots < lengths[:, None]
        pairs = np.where(real, self.starts[chosen][:, None] + slots, 0)  # target j of row i: stream[start + j]
        targets = np.where(real, self.stream[pairs], PAD_ID)
        before = np.where(slots == 0, EOS_ID, self.stream[np.maximum(pairs - 1, 0)])
        return {
            "inputs": np.where(real, before, PAD_ID).astype(np.int32),
            "targets": targets.astype(np.int32),
            "mask": real.astype(np.float32),
        }


def line_eval_batches(stream: np.ndarray, batch_size: int, seq_len: int, name: str) -> Iterator[Batch]:
    """Batches whose rows are the lines of `stream` in order, one each, so that every target is
    scored once, each sentence alone from its start; the last batch is filled up with padding
    rows (mask 0).

    Yields:
      the keys of `LineBatches.rows`, [batch_size, seq_len] each.
    """
    lines = LineBatches(stream, 1, seq_len, seed=0, name=name)
    check_positive(batch_size, "batch_size")
    for first in range(0, lines.num_rows, batch_size):
        chosen = np.arange(first, first + batch_size)
        yield lines.rows(np.where(chosen < lines.num_rows, chosen, -1))
