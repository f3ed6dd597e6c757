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


def epoch_rows(seed: int, epoch: int, num_rows: int, batch_size: int, position: int) -> np.ndarray:
    """Rows [B] int64 of the position-th batch of epoch `epoch`: a permutation of `num_rows`
    rows drawn from (seed, epoch), cut into batches of `batch_size`."""
    order = np.random.default_rng([seed, epoch]).permutation(num_rows)
    return order[position * batch_size : (position + 1) * batch_size]
