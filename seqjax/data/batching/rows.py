"""What every batcher shares: the batch type, row ranges (the rows of a batch one process
builds), the checks of batchers' arguments and the epoch order of rows.

Every batcher here is index-addressed: `batch(i)` depends only on the data, the seed and i. A
run's data position is the number of batches it has drawn, so a resumed run that asks for
`batch(step)` continues exactly where it stopped. Epoch orders are permutations drawn from
`numpy.random.default_rng((seed, epoch))`. `batch(i, rows)` builds only the chosen rows of
batch i — what one process of a multi-process run feeds its devices — equal to those rows of
the whole batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

Batch = dict[str, np.ndarray]


def check_positive(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def check_stream(stream: ArrayLike) -> np.ndarray:
    """`stream` itself (a memory map stays one: rows are read from it, never a copy of it all)."""
    stream = np.asarray(stream)
    if stream.ndim != 1 or not np.issubdtype(stream.dtype, np.integer):
        raise ValueError(f"stream must be a 1-D integer array, got {stream.dtype} {stream.shape}")
    return stream


def check_index(index: int) -> None:
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"index must be an int >= 0, got {index!r}")


def check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")


RowRanges = Sequence[tuple[int, int]]


def selected_rows(rows: RowRanges | None, batch_size: int) -> np.ndarray:
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


class ShuffledRows:
    """The order of a batcher of `num_rows` rows of one length: epoch e visits them in a
    permutation drawn from (seed, e), `batch_size` at a time (the rows left over by the division
    into batches differ from epoch to epoch). A subclass sets `batch_size`, `num_rows` and `seed`
    and builds a batch from the rows `chosen` picks.
    """

    batch_size: int
    num_rows: int
    seed: int
    _cached_epoch: tuple[int, np.ndarray] | None = None

    @property
    def batches_per_epoch(self) -> int:
        return self.num_rows // self.batch_size

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The rows [num_rows] int64 in epoch `epoch`'s order."""
        # One read and one write of the cache: loader threads building batches of two epochs
        # at once each keep their own epoch's order.
        cached = self._cached_epoch
        if cached is None or cached[0] != epoch:
            cached = (epoch, np.random.default_rng([self.seed, epoch]).permutation(self.num_rows))
            self._cached_epoch = cached
        return cached[1]

    def chosen(self, index: int, rows: RowRanges | None) -> np.ndarray:
        """The rows [N] int64 of the index-th batch, or of its row ranges `rows` only ([start,
        stop) pairs, N rows in all, in the order given; all B rows when None)."""
        check_index(index)
        selected = selected_rows(rows, self.batch_size)
        epoch, position = divmod(int(index), self.batches_per_epoch)
        batch_rows = self.epoch_order(epoch)[position * self.batch_size : (position + 1) * self.batch_size]
        chosen: np.ndarray = batch_rows[selected]
        return chosen
