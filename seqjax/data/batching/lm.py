"""Language-model batches over a token stream: concatenate-and-chunk rows for training,
consecutive chunks of the whole stream for exact evaluation. The LM batch is always [B, T].
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from seqjax.data.batching.rows import Batch, RowRanges, ShuffledRows, check_positive, check_seed, check_stream
from seqjax.data.tokenizers.vocab import EOS_ID, PAD_ID


class LMBatches(ShuffledRows):
    """Concatenate-and-chunk language-model batches over a token stream.

    The stream [n] is cut into rows of seq_len + 1 tokens that overlap by one token (row r
    starts at r·T), so every token after the first is a target of exactly one row. Epoch e
    visits `batches_per_epoch` batches of rows in a permutation drawn from (seed, e); the
    rows left over by the division into batches differ from epoch to epoch.
    """

    def __init__(self, stream: np.ndarray, batch_size: int, seq_len: int, seed: int):
        self.stream = check_stream(stream)
        check_positive(batch_size, "batch_size")
        check_positive(seq_len, "seq_len")
        check_seed(seed)
        self.batch_size, self.seq_len, self.seed = batch_size, seq_len, seed
        self.num_rows = max(len(self.stream) - 1, 0) // seq_len
        if self.num_rows < batch_size:
            raise ValueError(
                f"stream must hold at least batch_size={batch_size} rows of seq_len+1={seq_len + 1} "
                f"tokens ({batch_size * seq_len + 1} tokens), got {len(self.stream)} tokens "
                f"({self.num_rows} rows)"
            )

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The [rows, length] of every batch: [B, T]."""
        return [(self.batch_size, self.seq_len)]

    def batch(self, index: int, rows: RowRanges | None = None) -> Batch:
        """The index-th batch, or only its row ranges `rows` ([start, stop) pairs, N rows in
        all, in the order given; all B rows when None), equal to those rows of the whole batch.

        Returns:
          inputs, targets [N, T] int32 (targets = inputs shifted by one), mask [N, T] float32
          (all ones).
        """
        chosen = self.chosen(index, rows)
        windows = self.stream[chosen[:, None] * self.seq_len + np.arange(self.seq_len + 1)].astype(np.int32)
        return {
            "inputs": windows[:, :-1],
            "targets": windows[:, 1:],
            "mask": np.ones((len(chosen), self.seq_len), np.float32),
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
    targets = check_stream(stream).astype(np.int32)
    check_positive(batch_size, "batch_size")
    check_positive(seq_len, "seq_len")
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
