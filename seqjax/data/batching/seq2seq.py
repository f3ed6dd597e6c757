"""Length-bucketed encoder-decoder batches: a seq2seq batch is [B, L] for L in a small fixed
set of bucket lengths, which bounds recompilation; evaluation keeps every pair.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from seqjax.data.batching.rows import Batch, RowRanges, check_index, check_positive, check_seed, selected_rows
from seqjax.data.store.token_store import Ragged
from seqjax.data.tokenizers.vocab import BOS_ID, EOS_ID, PAD_ID


def check_pairs(
    src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], batch_size: int, buckets: Sequence[int]
) -> tuple[int, ...]:
    if len(src) != len(tgt):
        raise ValueError(f"src and tgt must have equal lengths, got {len(src)} and {len(tgt)}")
    for name, sequences in (("src", src), ("tgt", tgt)):
        if isinstance(sequences, Ragged):  # ids of a token store: 1-D integers by construction
            continue
        for i, ids in enumerate(sequences):
            if np.ndim(ids) != 1 or not np.issubdtype(np.asarray(ids).dtype, np.integer):
                raise ValueError(
                    f"{name}[{i}] must be a 1-D integer array, got {np.asarray(ids).dtype} {np.shape(ids)}"
                )
    check_positive(batch_size, "batch_size")
    buckets = tuple(buckets)
    if not buckets or any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 2 for b in buckets):
        raise ValueError(f"buckets must be a non-empty tuple of ints >= 2, got {buckets}")
    if any(a >= b for a, b in zip(buckets, buckets[1:])):
        raise ValueError(f"buckets must be strictly increasing, got {buckets}")
    return buckets


def pair_positions(src: Sequence[np.ndarray], tgt: Sequence[np.ndarray]) -> np.ndarray:
    """[n] int64: positions each example needs, source + `</s>` and `<s>` + target (or target + `</s>`)."""
    if isinstance(src, Ragged) and isinstance(tgt, Ragged):
        result: np.ndarray = np.maximum(src.lengths, tgt.lengths) + 1
        return result
    return np.array([max(len(s), len(t)) + 1 for s, t in zip(src, tgt)], dtype=np.int64)


def bucketed_pairs(
    src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], batch_size: int, buckets: Sequence[int], seed: int
) -> tuple[tuple[int, ...], list[np.ndarray], int]:
    """Length-bucketed pairs, checked (`check_pairs`, seed an int >= 0), each in the smallest
    bucket that holds it: (the buckets, the example indices [n_k] int64 of each bucket k, the
    number of pairs longer than the largest bucket, which none holds)."""
    buckets = check_pairs(src, tgt, batch_size, buckets)
    check_seed(seed)
    bucket_of = np.searchsorted(np.array(buckets), pair_positions(src, tgt))
    return (
        buckets,
        [np.flatnonzero(bucket_of == k) for k in range(len(buckets))],
        int(np.sum(bucket_of == len(buckets))),
    )


def pad_pairs(
    src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], rows: np.ndarray, length: int, batch_size: int
) -> Batch:
    """A [batch_size, length] batch of examples `rows`; a row of example -1, and the rows
    beyond them, are an empty example (source `</s>`, input `<s>`) with mask 0, so that no
    attention row is fully masked."""
    batch = {
        "src": np.full((batch_size, length), PAD_ID, np.int32),
        "src_mask": np.zeros((batch_size, length), np.float32),
        "inputs": np.full((batch_size, length), PAD_ID, np.int32),
        "targets": np.full((batch_size, length), PAD_ID, np.int32),
        "mask": np.zeros((batch_size, length), np.float32),
    }
    batch["src"][:, 0] = EOS_ID
    batch["src_mask"][:, 0] = 1.0
    batch["inputs"][:, 0] = BOS_ID
    for row, example in enumerate(rows):
        if example < 0:
            continue
        source, target = src[example], tgt[example]
        batch["src"][row, : len(source)] = source
        batch["src"][row, len(source)] = EOS_ID
        batch["src_mask"][row, : len(source) + 1] = 1.0
        batch["inputs"][row, 1 : len(target) + 1] = target
        batch["targets"][row, : len(target)] = target
        batch["targets"][row, len(target)] = EOS_ID
        batch["mask"][row, : len(target) + 1] = 1.0
    return batch


class Seq2SeqBatches:
    """Length-bucketed encoder-decoder batches.

    Each example goes to the smallest bucket that holds it (length + 1, for `</s>` after the
    source and `<s>`/`</s>` around the target); longer ones are dropped (`dropped` counts
    them). Epoch e shuffles each bucket and the order of the full batches, from (seed, e);
    a bucket's remainder (fewer than B examples) waits for a later epoch's shuffle.
    """

    def __init__(
        self, src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], batch_size: int, buckets: tuple[int, ...], seed: int
    ):
        self.buckets, self.members, self.dropped = bucketed_pairs(src, tgt, batch_size, buckets, seed)
        self.src, self.tgt, self.batch_size, self.seed = src, tgt, batch_size, seed
        if self.batches_per_epoch == 0:
            raise ValueError(
                f"some bucket must hold batch_size={batch_size} examples, got "
                f"{[len(m) for m in self.members]} examples in buckets {self.buckets} "
                f"({self.dropped} longer than {self.buckets[-1] - 1} tokens dropped)"
            )
        self._cached_epoch: tuple[int, list[tuple[int, np.ndarray]]] | None = None

    @property
    def batches_per_epoch(self) -> int:
        return sum(len(m) // self.batch_size for m in self.members)

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The [rows, length] of every batch this gives: [B, L] for each bucket L holding a full batch."""
        return [(self.batch_size, length) for length, m in zip(self.buckets, self.members) if len(m) >= self.batch_size]

    def _schedule(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        """The epoch's batches as (bucket index, example indices [B]) in drawing order."""
        cached = self._cached_epoch  # read once, as in ShuffledRows.epoch_order
        if cached is None or cached[0] != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            batches = []
            for k, members in enumerate(self.members):
                full = len(members) // self.batch_size * self.batch_size
                shuffled = rng.permutation(members)[:full].reshape(-1, self.batch_size)
                batches += [(k, rows) for rows in shuffled]
            order = rng.permutation(len(batches))
            cached = (epoch, [batches[i] for i in order])
            self._cached_epoch = cached
        return cached[1]

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch:
        """The index-th batch, or only its row ranges `rows` ([start, stop) pairs, N rows in
        all, in the order given; all B rows when None), equal to those rows of the whole batch.

        The length S = T is the bucket of the whole batch (the schedule draws each batch from
        one bucket), so every process's rows of batch i have the same shape.

        Returns:
          src [N, S] int32 (source + `</s>`), src_mask [N, S] float32, inputs [N, T] int32
          (`<s>` + target), targets [N, T] int32 (target + `</s>`), mask [N, T] float32;
          padding `<pad>` with mask 0.
        """
        check_index(index)
        selected = selected_rows(rows, self.batch_size)
        epoch, position = divmod(int(index), self.batches_per_epoch)
        bucket, examples = self._schedule(epoch)[position]
        return pad_pairs(self.src, self.tgt, examples[selected], self.buckets[bucket], len(selected))


def seq2seq_eval_batches(
    src: Sequence[np.ndarray],
    tgt: Sequence[np.ndarray],
    batch_size: int,
    buckets: tuple[int, ...],
    max_length: int | None = None,
) -> Iterator[tuple[Batch, np.ndarray]]:
    """Every example exactly once, bucket by bucket, in index order within a bucket.

    Examples longer than the largest bucket are kept (evaluation must not drop any) in one
    extra length: their longest, rounded up to a multiple of the largest bucket, but no more
    than `max_length` (the longest a model reads, None: no limit) when their longest fits it.

    Yields:
      (batch as `Seq2SeqBatches.batch`, indices [B] int64: the example in each row, -1 for a
      padding row, whose mask is 0).
    """
    buckets = check_pairs(src, tgt, batch_size, buckets)
    lengths = pair_positions(src, tgt)
    if len(lengths) and lengths.max() > buckets[-1]:
        longest = int(lengths.max())
        rounded = -(-longest // buckets[-1]) * buckets[-1]
        buckets += (rounded if max_length is None or longest > max_length else min(rounded, max_length),)
    bucket_of = np.searchsorted(np.array(buckets), lengths)
    for k, length in enumerate(buckets):
        members = np.flatnonzero(bucket_of == k)
        for start in range(0, len(members), batch_size):
            rows = members[start : start + batch_size]
            indices = np.full(batch_size, -1, np.int64)
            indices[: len(rows)] = rows
            yield pad_pairs(src, tgt, rows, length, batch_size), indices
