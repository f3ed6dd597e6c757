"""Stateless, index-addressed batches: `batch(i)` depends only on the data, the seed and i.

A run's data position is the number of batches it has drawn, so a resumed run that asks
for `batch(step)` continues exactly where it stopped. Epoch orders are permutations drawn
from `numpy.random.default_rng((seed, epoch))`. Batches are numpy arrays of fixed shapes:
the LM batch is always [B, T]; a seq2seq batch is [B, L] for L in a small fixed set of
bucket lengths, which bounds recompilation. `batch(i, rows)` builds only the chosen rows
of batch i — what one process of a multi-process run feeds its devices — equal to those
rows of the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from seqjax.data.store import Ragged
from seqjax.data.vocab import BOS_ID, EOS_ID, PAD_ID

Batch = dict[str, np.ndarray]


def _check_positive(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def _check_stream(stream: ArrayLike) -> np.ndarray:
    """`stream` itself (a memory map stays one: rows are read from it, never a copy of it all)."""
    stream = np.asarray(stream)
    if stream.ndim != 1 or not np.issubdtype(stream.dtype, np.integer):
        raise ValueError(f"stream must be a 1-D integer array, got {stream.dtype} {stream.shape}")
    return stream


def _check_index(index: int) -> None:
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"index must be an int >= 0, got {index!r}")


def _check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")


RowRanges = Sequence[tuple[int, int]]


def _selected_rows(rows: RowRanges | None, batch_size: int) -> np.ndarray:
    """Positions [N] int64 in the global batch of the row ranges [start, stop), concatenated
    in the order given; every position (N = B) when `rows` is None."""
    if rows is None:
        return np.arange(batch_size)

    def valid(span: object) -> bool:
        return (
            isinstance(span, (tuple, list))
            and len(span) == 2
            and all(not isinstance(x, bool) and isinstance(x, (int, np.integer)) for x in span)
            and 0 <= span[0] < span[1] <= batch_size
        )

    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not rows or not all(map(valid, rows)):
        raise ValueError(
            f"rows must be a non-empty sequence of (start, stop) ranges with "
            f"0 <= start < stop <= batch_size={batch_size}, got {rows!r}"
        )
    return np.concatenate([np.arange(start, stop) for start, stop in rows])


class LMBatches:
    """Concatenate-and-chunk language-model batches over a token stream.

    The stream [n] is cut into rows of seq_len + 1 tokens that overlap by one token (row r
    starts at r·T), so every token after the first is a target of exactly one row. Epoch e
    visits `batches_per_epoch` batches of rows in a permutation drawn from (seed, e); the
    rows left over by the division into batches differ from epoch to epoch.
    """

    def __init__(self, stream: np.ndarray, batch_size: int, seq_len: int, seed: int):
        self.stream = _check_stream(stream)
        _check_positive(batch_size, "batch_size")
        _check_positive(seq_len, "seq_len")
        _check_seed(seed)
        self.batch_size, self.seq_len, self.seed = batch_size, seq_len, seed
        self.num_rows = max(len(self.stream) - 1, 0) // seq_len
        if self.num_rows < batch_size:
            raise ValueError(
                f"stream must hold at least batch_size={batch_size} rows of seq_len+1={seq_len + 1} "
                f"tokens ({batch_size * seq_len + 1} tokens), got {len(self.stream)} tokens "
                f"({self.num_rows} rows)"
            )
        self._cached_epoch: tuple[int, np.ndarray] | None = None

    @property
    def batches_per_epoch(self) -> int:
        return self.num_rows // self.batch_size

    def _permutation(self, epoch: int) -> np.ndarray:
        # One read and one write of the cache: loader threads building batches of two epochs
        # at once each keep their own epoch's order.
        cached = self._cached_epoch
        if cached is None or cached[0] != epoch:
            cached = (epoch, np.random.default_rng([self.seed, epoch]).permutation(self.num_rows))
            self._cached_epoch = cached
        return cached[1]

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch:
        """The index-th batch, or only its row ranges `rows` ([start, stop) pairs, N rows in
        all, in the order given; all B rows when None), equal to those rows of the whole batch.

        Returns:
          inputs, targets [N, T] int32 (targets = inputs shifted by one), mask [N, T] float32
          (all ones).
        """
        _check_index(index)
        selected = _selected_rows(rows, self.batch_size)
        epoch, position = divmod(int(index), self.batches_per_epoch)
        order = self._permutation(epoch)[position * self.batch_size : (position + 1) * self.batch_size]
        windows = self.stream[order[selected, None] * self.seq_len + np.arange(self.seq_len + 1)].astype(np.int32)
        return {
            "inputs": windows[:, :-1],
            "targets": windows[:, 1:],
            "mask": np.ones((len(selected), self.seq_len), np.float32),
        }


def lm_eval_batches(stream: np.ndarray, batch_size: int, seq_len: int) -> Iterator[Batch]:
    """Batches whose targets are every token of `stream` exactly once, in order.

    Chunk c (row c mod B of batch c div B) holds targets stream[c·T : (c+1)·T]; its inputs
    are the same tokens shifted right by one, the first token's context being `</s>`, the end
    of the line before the split. The last batch is padded with `<pad>` and mask 0, so the
    sum of masked losses over all batches is the split's exact log-likelihood.

    Yields:
      {"inputs", "targets": [B, T] int32, "mask": [B, T] float32}
    """
    targets = _check_stream(stream).astype(np.int32)
    _check_positive(batch_size, "batch_size")
    _check_positive(seq_len, "seq_len")
    if len(targets) == 0:
        raise ValueError("stream must hold at least one token, got 0")
    inputs = np.concatenate([np.array([EOS_ID], np.int32), targets[:-1]])
    per_batch = batch_size * seq_len
    padded = -(-len(targets) // per_batch) * per_batch
    padding = padded - len(targets)
    shape = (-1, batch_size, seq_len)
    inputs = np.pad(inputs, (0, padding), constant_values=PAD_ID).reshape(shape)
    targets = np.pad(targets, (0, padding), constant_values=PAD_ID).reshape(shape)
    mask = (np.arange(padded) < len(stream)).astype(np.float32).reshape(shape)
    for i in range(len(inputs)):
        yield {"inputs": inputs[i], "targets": targets[i], "mask": mask[i]}


def _check_pairs(
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
    _check_positive(batch_size, "batch_size")
    buckets = tuple(buckets)
    if not buckets or any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 2 for b in buckets):
        raise ValueError(f"buckets must be a non-empty tuple of ints >= 2, got {buckets}")
    if any(a >= b for a, b in zip(buckets, buckets[1:])):
        raise ValueError(f"buckets must be strictly increasing, got {buckets}")
    return buckets


def pair_positions(src: Sequence[np.ndarray], tgt: Sequence[np.ndarray]) -> np.ndarray:
    """[n] int64: positions each example needs, source + `</s>` and `<s>` + target (or target + `</s>`)."""
    if isinstance(src, Ragged) and isinstance(tgt, Ragged):
        return np.maximum(src.lengths, tgt.lengths) + 1
    return np.array([max(len(s), len(t)) + 1 for s, t in zip(src, tgt)], dtype=np.int64)


def _bucketed_pairs(
    src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], batch_size: int, buckets: Sequence[int], seed: int
) -> tuple[tuple[int, ...], list[np.ndarray], int]:
    """Length-bucketed pairs, checked (`_check_pairs`, seed an int >= 0), each in the smallest
    bucket that holds it: (the buckets, the example indices [n_k] int64 of each bucket k, the
    number of pairs longer than the largest bucket, which none holds)."""
    buckets = _check_pairs(src, tgt, batch_size, buckets)
    _check_seed(seed)
    bucket_of = np.searchsorted(np.array(buckets), pair_positions(src, tgt))
    return (
        buckets,
        [np.flatnonzero(bucket_of == k) for k in range(len(buckets))],
        int(np.sum(bucket_of == len(buckets))),
    )


def _pad_pairs(
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
        self.buckets, self.members, self.dropped = _bucketed_pairs(src, tgt, batch_size, buckets, seed)
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

    def _schedule(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        """The epoch's batches as (bucket index, example indices [B]) in drawing order."""
        cached = self._cached_epoch  # read once, as in LMBatches._permutation
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
        _check_index(index)
        selected = _selected_rows(rows, self.batch_size)
        epoch, position = divmod(int(index), self.batches_per_epoch)
        bucket, examples = self._schedule(epoch)[position]
        return _pad_pairs(self.src, self.tgt, examples[selected], self.buckets[bucket], len(selected))


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
    buckets = _check_pairs(src, tgt, batch_size, buckets)
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
            yield _pad_pairs(src, tgt, rows, length, batch_size), indices
