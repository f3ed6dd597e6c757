"""Encoder-decoder batches filled to a token budget (fairseq's `--max-tokens`), not a row count.

A fixed number of pairs per batch wastes most of a batch of short pairs and can overflow
memory with long ones; a budget of M padded positions instead gives a batch of length bucket
L the most pairs that fit, B_L = M // L rows, rounded down to a multiple of `row_multiple`
(the devices of the data axis times the microbatches, so that every batch splits evenly).
Each pair goes to the smallest bucket that holds it, as in `Seq2SeqBatches`; pairs longer
than the largest bucket are dropped (`dropped` counts them). The batch shapes come from the
fixed set {[B_L, L] for each bucket L}, so a jitted step compiles at most once per bucket.

Epoch e shuffles each bucket from (seed, e) and cuts it into batches of B_L pairs, the last
one padded with empty rows (mask 0), so every kept pair is in exactly one batch of every
epoch; the order of all the epoch's batches is shuffled from the same generator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seqjax.data.batching.rows import Batch, RowRanges, check_index, check_positive, selected_rows
from seqjax.data.batching.seq2seq import bucketed_pairs, pad_pairs


class TokenBudgetBatches:
    """Length-bucketed encoder-decoder batches of at most `max_tokens` padded positions.

    `rows_per_batch[k]` is B_L of bucket k (0 for a bucket no pair falls in): B_L · L <=
    max_tokens, capped at the bucket's pairs rounded up to `row_multiple`. `batch_size` is
    `row_multiple`, the number of equal parts a batch is addressed in: `batch(i, rows)` takes
    row ranges over these parts, part p being rows [p · B_L / batch_size, (p + 1) · B_L /
    batch_size) of the batch, which is what one process of a multi-process run reads.
    """

    def __init__(
        self,
        src: Sequence[np.ndarray],
        tgt: Sequence[np.ndarray],
        max_tokens: int,
        buckets: tuple[int, ...],
        seed: int,
        row_multiple: int = 1,
    ):
        self.buckets, self.members, self.dropped = bucketed_pairs(src, tgt, 1, buckets, seed)
        check_positive(max_tokens, "data.max_tokens")
        check_positive(row_multiple, "row_multiple")
        self.src, self.tgt, self.seed, self.batch_size = src, tgt, seed, int(row_multiple)
        used = [k for k, members in enumerate(self.members) if len(members)]
        if not used:
            raise ValueError(f"no pair fits the largest bucket {self.buckets[-1]} ({self.dropped} longer dropped)")
        longest = self.buckets[used[-1]]
        if max_tokens < longest * row_multiple:
            times = f" times the {row_multiple} parts every batch splits into" if row_multiple > 1 else ""
            raise ValueError(
                f"data.max_tokens={max_tokens} is smaller than the {longest} padded positions of the longest "
                f"pairs kept (bucket {longest}){times}: raise data.max_tokens to at least {longest * row_multiple} "
                "or lower data.max_pair_len"
            )
        m = row_multiple
        self.rows_per_batch = tuple(
            min(max_tokens // length // m, -(-len(members) // m)) * m
            for length, members in zip(self.buckets, self.members)
        )
        self._cached_epoch: tuple[int, list[tuple[int, np.ndarray]]] | None = None

    @property
    def batches_per_epoch(self) -> int:
        return sum(-(-len(members) // rows) for members, rows in zip(self.members, self.rows_per_batch) if rows)

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The [rows, length] of every batch this gives, one per bucket that holds pairs."""
        return [(rows, length) for rows, length in zip(self.rows_per_batch, self.buckets) if rows]

    def _schedule(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        """The epoch's batches as (bucket index, example indices [B_L], -1 for an empty row)."""
        cached = self._cached_epoch  # read once, as in ShuffledRows.epoch_order
        if cached is None or cached[0] != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            batches = []
            for k, (members, rows) in enumerate(zip(self.members, self.rows_per_batch)):
                if not rows:
                    continue
                shuffled = rng.permutation(members)
                padded = np.full(-(-len(members) // rows) * rows, -1, np.int64)
                padded[: len(members)] = shuffled
                batches += [(k, examples) for examples in padded.reshape(-1, rows)]
            order = rng.permutation(len(batches))
            cached = (epoch, [batches[i] for i in order])
            self._cached_epoch = cached
        return cached[1]

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch:
        """The index-th batch, or only its parts `rows` ([start, stop) ranges over the
        `batch_size` parts, in the order given; the whole batch when None), equal to those
        rows of the whole batch.

        Returns:
          as `Seq2SeqBatches.batch`, with N = B_L (or the chosen parts' rows) and S = T = L
          of the batch's bucket.
        """
        check_index(index)
        parts = selected_rows(rows, self.batch_size)
        epoch, position = divmod(int(index), self.batches_per_epoch)
        bucket, examples = self._schedule(epoch)[position]
        part_rows = len(examples) // self.batch_size
        chosen = examples[(parts[:, None] * part_rows + np.arange(part_rows)).reshape(-1)]
        return pad_pairs(self.src, self.tgt, chosen, self.buckets[bucket], len(chosen))
