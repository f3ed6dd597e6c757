"""Packed training batches (`data.packing`): whole lines (LM) or whole pairs (seq2seq), several
to a row, each a segment with its own ids and positions, so that a row wastes little padding
and a line never attends to another.

Rows are filled by best-fit decreasing: pieces longest first, each into the open row whose
free space fits it most tightly. Packing is done once, from the data alone; epochs then
visit the rows in a permutation drawn from (seed, epoch), exactly as `LMBatches`, so
`batch(i)` stays a pure function of the data, the seed and i (resume, multi-process rows).

A packed batch adds `segment_ids` [B, T] int32 (1, 2, ... per row, 0 for padding) and
`positions` [B, T] int32 (each token's position within its segment) to the usual keys;
seq2seq batches also `src_segment_ids` and `src_positions` [B, S]. A Transformer given them
computes every segment as if it were alone in its row (`seqjax.models.language_models.transformer`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

import numpy as np

from seqjax.checks import check_int
from seqjax.data.batching.rows import Batch, RowRanges, ShuffledRows, check_positive, check_seed, check_stream
from seqjax.data.batching.seq2seq import check_pairs
from seqjax.data.tokenizers.vocab import BOS_ID, EOS_ID, PAD_ID


def best_fit_decreasing(
    lengths: np.ndarray, capacity: int, max_segments: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Assigns pieces of `lengths` [P] (each in [1, capacity]) to rows of `capacity` slots, at
    most `max_segments` pieces to a row (0: as many as fit).

    Returns:
      row [P], offset [P] (first slot in the row) and segment [P] (1-based order within the
      row), int64 each; rows are numbered in the order they are opened.
    """
    row, offset, segment = (np.zeros(len(lengths), np.int64) for _ in range(3))
    free: dict[int, list[int]] = {}  # free space -> rows with exactly that much left
    sizes: list[int] = []  # the keys of `free` with rows, sorted, for bisection
    used: list[int] = []  # slots filled per row
    count: list[int] = []  # segments per row
    for piece in np.argsort(-lengths, kind="stable"):
        length = int(lengths[piece])
        at = bisect.bisect_left(sizes, length)
        if at < len(sizes):
            space = sizes[at]
            target = free[space].pop()
            if not free[space]:
                del free[space], sizes[at]
        else:
            space, target = capacity, len(used)
            used.append(0)
            count.append(0)
        row[piece], offset[piece] = target, used[target]
        count[target] += 1
        segment[piece] = count[target]
        used[target] += length
        left = space - length
        if left and count[target] != max_segments:
            if left not in free:
                free[left] = []
                bisect.insort(sizes, left)
            free[left].append(target)
    return row, offset, segment


def check_segments(max_segments: int) -> None:
    """max_segments: an int >= 0 (0: a row holds as many segments as fit)."""
    check_int("data.max_segments", max_segments, minimum=0)


class PackedLMBatches(ShuffledRows):
    """Language-model rows of whole lines.

    Each line of the stream (its tokens and the `</s>` that ends it) is a segment of
    input/target pairs whose first input is the `</s>` before the line, as in
    `lm_eval_batches`; a line longer than seq_len is cut into pieces of seq_len pairs, each
    its own segment. Every target of the stream is in exactly one row.

    A row holds at most `max_segments` segments (0: as many as fit).

    Attributes:
      num_rows: packed rows R; batches_per_epoch = R // batch_size.
      fill: the fraction of the R · seq_len slots that hold a target.
    """

    def __init__(self, stream: np.ndarray, batch_size: int, seq_len: int, seed: int, max_segments: int = 0):
        stream = check_stream(stream)
        check_positive(batch_size, "batch_size")
        check_positive(seq_len, "seq_len")
        check_seed(seed)
        check_segments(max_segments)
        self.batch_size, self.seq_len, self.seed = batch_size, seq_len, seed
        # Pair j: input before[j], target stream[j]; a line's pairs end at its `</s>`.
        self.before = np.concatenate([np.array([EOS_ID], np.int32), stream[:-1]])
        self.stream = stream
        ends = np.flatnonzero(stream == EOS_ID)
        if len(stream) and (not len(ends) or ends[-1] != len(stream) - 1):
            ends = np.append(ends, len(stream) - 1)  # a last line without its `</s>`
        starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else ends
        pieces = [
            (first, min(seq_len, int(end) + 1 - first))
            for start, end in zip(starts, ends)
            for first in range(int(start), int(end) + 1, seq_len)
        ]
        piece_starts = np.array([first for first, _ in pieces], np.int64)
        lengths = np.array([length for _, length in pieces], np.int64)
        row, offset, segment = best_fit_decreasing(lengths, seq_len, max_segments)
        self.num_rows = int(row.max()) + 1 if len(row) else 0
        if self.num_rows < batch_size:
            raise ValueError(
                f"stream must pack into at least batch_size={batch_size} rows of seq_len={seq_len}, "
                f"got {self.num_rows} rows from {len(stream)} tokens"
            )
        # [R, T] slot tables: the pair index each slot holds (-1: padding), its segment, position.
        piece_of = np.repeat(np.arange(len(lengths)), lengths)
        within = np.arange(len(piece_of)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        slots = row[piece_of] * seq_len + offset[piece_of] + within
        shape = (self.num_rows, seq_len)
        self.pairs = np.full(shape, -1, np.int64)
        self.segments = np.zeros(shape, np.int32)
        self.positions = np.zeros(shape, np.int32)
        self.pairs.flat[slots] = piece_starts[piece_of] + within
        self.segments.flat[slots] = segment[piece_of]
        self.positions.flat[slots] = within
        self.fill = len(slots) / (self.num_rows * seq_len)

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The [rows, length] of every batch: [B, T]."""
        return [(self.batch_size, self.seq_len)]

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch:
        """The index-th batch, or only its row ranges `rows` (as `LMBatches.batch`).

        Returns:
          inputs, targets [N, T] int32 (`<pad>` in padding slots), mask [N, T] float32 (1 at
          targets), segment_ids [N, T] int32 (0: padding), positions [N, T] int32.
        """
        return self.rows(self.chosen(index, rows))

    def rows(self, chosen: np.ndarray) -> Batch:
        """The packed rows `chosen` [N] (indices in [0, R), -1 for an all-padding row) as a batch."""
        pairs = np.where(chosen[:, None] >= 0, self.pairs[chosen], -1)
        real = pairs >= 0
        safe = np.where(real, pairs, 0)
        return {
            "inputs": np.where(real, self.before[safe], PAD_ID).astype(np.int32),
            "targets": np.where(real, self.stream[safe], PAD_ID).astype(np.int32),
            "mask": real.astype(np.float32),
            "segment_ids": np.where(real, self.segments[chosen], 0).astype(np.int32),
            "positions": np.where(real, self.positions[chosen], 0).astype(np.int32),
        }


def packed_lm_eval_batches(stream: np.ndarray, batch_size: int, seq_len: int, max_segments: int = 0) -> Iterator[Batch]:
    """Batches whose targets are every token of `stream` exactly once, each line scored alone
    from its own start, as `PackedLMBatches` trains on it: the packed rows in order, the last
    batch filled up with padding rows (mask 0). The evaluation of a packed-trained LM.

    Yields:
      the keys of `PackedLMBatches.batch`, [batch_size, seq_len] each.
    """
    check_positive(batch_size, "batch_size")
    packed = PackedLMBatches(stream, 1, seq_len, seed=0, max_segments=max_segments)
    for first in range(0, packed.num_rows, batch_size):
        chosen = np.arange(first, first + batch_size)
        yield packed.rows(np.where(chosen < packed.num_rows, chosen, -1))


class PackedSeq2SeqBatches(ShuffledRows):
    """Encoder-decoder rows of whole pairs, all of one length L (`data.buckets[-1]`).

    Example k of a row takes the same slots [o, o + n) on both sides, n = max(|src|, |tgt|) + 1:
    source + `</s>` with positions from 0, `<s>` + target as inputs and target + `</s>` as
    targets; the shorter side's remaining slots are padding. Pairs longer than L - 1 tokens are
    dropped (`dropped` counts them). Every source slot is attended by position (src_mask 1);
    the segments decide what sees what. A row holds at most `max_segments` pairs (0: as many as fit).
    """

    def __init__(
        self,
        src: Sequence[np.ndarray],
        tgt: Sequence[np.ndarray],
        batch_size: int,
        length: int,
        seed: int,
        max_segments: int = 0,
    ):
        (length,) = check_pairs(src, tgt, batch_size, (length,))
        check_seed(seed)
        check_segments(max_segments)
        self.src, self.tgt, self.batch_size, self.length, self.seed = src, tgt, batch_size, length, seed
        sizes = np.array([max(len(s), len(t)) + 1 for s, t in zip(src, tgt)], np.int64)
        kept = np.flatnonzero(sizes <= length)
        self.dropped = len(sizes) - len(kept)
        row, offset, segment = best_fit_decreasing(sizes[kept], length, max_segments)
        self.num_rows = int(row.max()) + 1 if len(row) else 0
        if self.num_rows < batch_size:
            raise ValueError(
                f"pairs must pack into at least batch_size={batch_size} rows of length {length}, got "
                f"{self.num_rows} rows ({self.dropped} pairs longer than {length - 1} tokens dropped)"
            )
        self.members: list[list[tuple[int, int, int]]] = [[] for _ in range(self.num_rows)]
        for example, r, o, k in zip(kept, row, offset, segment):
            self.members[r].append((int(example), int(o), int(k)))

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The [rows, length] of every batch: [B, L]."""
        return [(self.batch_size, self.length)]

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch:
        """The index-th batch, or only its row ranges `rows` (as `Seq2SeqBatches.batch`).

        Returns:
          src [N, L] int32, src_mask [N, L] float32 (ones), src_segment_ids, src_positions
          [N, L] int32, inputs, targets [N, L] int32, mask [N, L] float32, segment_ids,
          positions [N, L] int32; padding `<pad>` in segment 0.
        """
        chosen = self.chosen(index, rows)
        shape = (len(chosen), self.length)
        batch = {name: np.full(shape, PAD_ID, np.int32) for name in ("src", "inputs", "targets")}
        for name in ("src_segment_ids", "src_positions", "segment_ids", "positions"):
            batch[name] = np.zeros(shape, np.int32)
        batch["src_mask"] = np.ones(shape, np.float32)
        batch["mask"] = np.zeros(shape, np.float32)
        for i, row in enumerate(chosen):
            for example, o, k in self.members[row]:
                source, target = self.src[example], self.tgt[example]
                n_src, n_tgt = len(source) + 1, len(target) + 1
                batch["src"][i, o : o + n_src] = np.append(source, EOS_ID)
                batch["src_segment_ids"][i, o : o + n_src] = k
                batch["src_positions"][i, o : o + n_src] = np.arange(n_src)
                batch["inputs"][i, o : o + n_tgt] = np.append(BOS_ID, target)
                batch["targets"][i, o : o + n_tgt] = np.append(target, EOS_ID)
                batch["mask"][i, o : o + n_tgt] = 1.0
                batch["segment_ids"][i, o : o + n_tgt] = k
                batch["positions"][i, o : o + n_tgt] = np.arange(n_tgt)
        return batch
