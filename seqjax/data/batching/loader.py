"""The training input pipeline: Grain over index-addressed batches.

The batchers (`LMBatches`, `Seq2SeqBatches`, the packed ones) already make batch i a pure
function of the data, the seed and i, reading only the rows asked for from the memory-mapped
token store: LM rows are windows of the stream addressed by index (nothing is chunked ahead),
seq2seq batches come from length buckets, epochs are permutations drawn from (seed, epoch).
Grain adds what a long run needs around them: a `MapDataset` whose record i is batch i (the
rows of this process only), read ahead by background threads (`ReadOptions`), and an
iterator whose state (`get_state`) is saved in the Orbax checkpoint beside the train state,
so that a resumed run draws exactly the batches an uninterrupted one would.

Each process reads only its own rows: the run passes the rows its devices hold
(`training.distributed.local_rows`); by default they are this process's contiguous block of
the batch under Grain's `ShardByJaxProcess`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import grain
import numpy as np
from grain.sharding import ShardByJaxProcess, ShardOptions

from seqjax.data.batching.rows import Batch, RowRanges

# Batches read ahead of the step consuming them, and the threads that read them.
PREFETCH = 4
THREADS = 2


class IndexedBatches(Protocol):
    """Batches addressed by index; `batch(i, rows)` builds the row ranges `rows` over
    `batch_size` equal parts of batch i (parts of one row each, except for
    `TokenBudgetBatches`, whose batches have one row count per length bucket)."""

    batch_size: int

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The [rows, length] of the whole batches it gives, every one that can occur: the shapes a
        train step is compiled for."""
        ...

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch: ...


def shard_rows(batch_size: int, shard: ShardOptions | None = None) -> list[tuple[int, int]]:
    """The row range [start, stop) of the batch that shard `shard` (default: this JAX
    process, `ShardByJaxProcess`) reads: the shard_index-th of shard_count equal blocks.

    Raises:
      ValueError: batch_size does not divide into shard_count blocks.
    """
    shard = ShardByJaxProcess() if shard is None else shard
    if batch_size % shard.shard_count:
        raise ValueError(
            f"train.batch_size must divide over the {shard.shard_count} processes reading it, got {batch_size}"
        )
    size = batch_size // shard.shard_count
    return [(shard.shard_index * size, (shard.shard_index + 1) * size)]


class BatchSource:
    """Grain's random-access source of batches: record i is `batches.batch(i, rows)`."""

    def __init__(self, batches: IndexedBatches, steps: int, rows: RowRanges):
        self.batches, self.steps, self.rows = batches, steps, rows

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, index: int) -> Batch:
        return self.batches.batch(int(index), self.rows)


class Loader:
    """Batches start, start + 1, ... steps - 1 of `batches` (this process's rows), prefetched.

    `global_rows(batch)` is the row count of the whole batch a yielded one is part of: what
    the global arrays of a multi-process run are assembled to.

    `state()` is JSON: the first batch and Grain's iterator state; `Loader.restore` continues
    from it.
    """

    def __init__(
        self,
        batches: IndexedBatches,
        steps: int,
        *,
        start: int = 0,
        rows: RowRanges | None = None,
        prefetch: int = PREFETCH,
        threads: int = THREADS,
    ):
        if not 0 <= start <= steps:
            raise ValueError(f"start must be in [0, steps={steps}], got {start}")
        self.start = start
        self.rows: Sequence[tuple[int, int]] = shard_rows(batches.batch_size) if rows is None else rows
        self._parts = batches.batch_size, sum(stop - start for start, stop in self.rows)
        dataset = grain.MapDataset.source(BatchSource(batches, steps, self.rows))[start:]
        options = grain.ReadOptions(num_threads=threads, prefetch_buffer_size=prefetch)
        self._iterator = iter(dataset.to_iter_dataset(options))

    def __iter__(self) -> Loader:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        return next(self._iterator)

    def global_rows(self, batch: dict[str, np.ndarray]) -> int:
        """The rows of the whole batch that `batch`, this process's parts of it, belongs to."""
        parts, local_parts = self._parts
        return len(batch["mask"]) * parts // local_parts

    def state(self) -> dict[str, Any]:
        return {"start": self.start, "grain": self._iterator.get_state()}

    @classmethod
    def restore(cls, batches: IndexedBatches, steps: int, state: dict[str, Any], **options: Any) -> Loader:
        """The loader of a saved `state()`: its next batch is the one the saved loader would
        have given next."""
        loader = cls(batches, steps, start=int(state["start"]), **options)
        loader._iterator.set_state(state["grain"])
        return loader
