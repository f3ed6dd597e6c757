"""The batches of a run's splits, chosen in one place: which batcher cuts a split, and the spec of
its batches (keys, shapes, dtypes). Training (`Experiment.train_batches`), evaluation
(`evaluation.eval_batches`) and `seqjax compile` (the abstract batch of the programs it compiles)
all ask a `BatchPlan`, so that what compiles is what runs.

What a row holds is the model's to say (`training.core.experiment.batch_plan` asks it): an
encoder-decoder reads sentence pairs ("pairs"), a latent-variable LM one whole line a row
("lines"), any other LM chunks of the token stream ("stream"). The config then picks the batcher:

  rows     training                                            evaluation
  stream   LMBatches; data.packing: PackedLMBatches            lm_eval_batches; packing: packed_lm_eval_batches
  lines    LineBatches                                         line_eval_batches
  pairs    Seq2SeqBatches; data.packing: PackedSeq2SeqBatches;  seq2seq_eval_batches
           data.max_tokens: TokenBudgetBatches
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import Literal, cast

import numpy as np

from seqjax.config import Config
from seqjax.data.batching.line_rows import LineBatches, line_eval_batches
from seqjax.data.batching.lm import LMBatches, lm_eval_batches
from seqjax.data.batching.loader import IndexedBatches
from seqjax.data.batching.packing import PackedLMBatches, PackedSeq2SeqBatches, packed_lm_eval_batches
from seqjax.data.batching.rows import Batch
from seqjax.data.batching.seq2seq import Seq2SeqBatches, seq2seq_eval_batches
from seqjax.data.batching.token_budget import TokenBudgetBatches
from seqjax.data.datasets import LMData, ParallelData

Rows = Literal["stream", "lines", "pairs"]
# The keys of a batch and their dtypes: every batch's, a pair batch's source, and those of packed rows.
TARGET_KEYS = {"inputs": np.dtype(np.int32), "targets": np.dtype(np.int32), "mask": np.dtype(np.float32)}
SOURCE_KEYS = {"src": np.dtype(np.int32), "src_mask": np.dtype(np.float32)}
PACKED_KEYS = {"segment_ids": np.dtype(np.int32), "positions": np.dtype(np.int32)}
PACKED_SOURCE_KEYS = {"src_segment_ids": np.dtype(np.int32), "src_positions": np.dtype(np.int32)}

Spec = dict[str, tuple[tuple[int, int], np.dtype]]


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """How a run cuts its data into batches.

    Attributes:
      rows: what a row holds ("stream" | "lines" | "pairs", as the module docstring says).
      packing: data.packing (training rows of several whole lines or pairs).
      max_segments: data.max_segments (the most lines or pairs a packed row holds; 0: as many as fit).
      batch_size: train.batch_size (the rows of a batch; evaluation's too).
      seq_len: data.seq_len (an LM row's positions).
      buckets: data.buckets (a pair batch's lengths).
      max_tokens: data.max_tokens (training pair batches filled to a token budget; 0: none).
      seed: train.seed (the epochs' orders).
      eval_batches: train.eval_batches (the first batches of a split evaluation scores; 0: all).
      max_length: the longest sequence the model reads (None: no limit), which bounds the extra
        length evaluation gives pairs longer than the largest bucket.
    """

    rows: Rows
    packing: bool
    max_segments: int
    batch_size: int
    seq_len: int
    buckets: tuple[int, ...]
    max_tokens: int
    seed: int
    eval_batches: int
    max_length: int | None

    @classmethod
    def of(cls, cfg: Config, rows: Rows, max_length: int | None) -> BatchPlan:
        """The plan of the run `cfg`, whose model reads `rows` and sequences of at most `max_length`."""
        d, t = cfg.data, cfg.train
        return cls(
            rows,
            d.packing,
            d.max_segments,
            t.batch_size,
            d.seq_len,
            tuple(d.buckets),
            d.max_tokens,
            t.seed,
            t.eval_batches,
            max_length,
        )

    def train(self, data: LMData | ParallelData, row_multiple: int = 1) -> IndexedBatches:
        """The train split's batches (`row_multiple`: what a token budget's rows are a multiple of,
        the data devices times the microbatches)."""
        if self.rows == "pairs":
            src, tgt = cast(ParallelData, data).splits["train"]
            if self.packing:
                return PackedSeq2SeqBatches(src, tgt, self.batch_size, self.buckets[-1], self.seed, self.max_segments)
            if self.max_tokens:
                return TokenBudgetBatches(src, tgt, self.max_tokens, self.buckets, self.seed, row_multiple)
            return Seq2SeqBatches(src, tgt, self.batch_size, self.buckets, self.seed)
        stream = cast(LMData, data).splits["train"]
        if self.rows == "lines":
            return LineBatches(stream, self.batch_size, self.seq_len, self.seed)
        if self.packing:
            return PackedLMBatches(stream, self.batch_size, self.seq_len, self.seed, self.max_segments)
        return LMBatches(stream, self.batch_size, self.seq_len, self.seed)

    def eval(self, data: LMData | ParallelData, split: str) -> Iterator[Batch]:
        """The batches of `split` in which every target is scored once, as the model trains (each
        line alone from its start when it trains on packed or single lines), the first
        train.eval_batches of them when that is > 0."""
        batches: Iterator[Batch]
        if self.rows == "pairs":
            src, tgt = cast(ParallelData, data).splits[split]
            pairs = seq2seq_eval_batches(src, tgt, self.batch_size, self.buckets, self.max_length)
            batches = (batch for batch, _ in pairs)
        else:
            stream = cast(LMData, data).splits[split]
            if self.rows == "lines":
                batches = line_eval_batches(stream, self.batch_size, self.seq_len, f"data.{split}")
            elif self.packing:
                batches = packed_lm_eval_batches(stream, self.batch_size, self.seq_len, self.max_segments)
            else:
                batches = lm_eval_batches(stream, self.batch_size, self.seq_len)
        return itertools.islice(batches, self.eval_batches) if self.eval_batches else batches

    def keys(self, split: str, *, packed: bool = True) -> dict[str, np.dtype]:
        """{key: dtype} of the batches of `split` ("train" or an evaluation split); without the
        keys of packed rows when `packed` is False (what a model is initialized from)."""
        keys = dict(TARGET_KEYS)
        if self.rows == "pairs":
            keys.update(SOURCE_KEYS)
        if packed and self.packing and (split == "train" or self.rows != "pairs"):  # pairs are evaluated unpacked
            keys.update(PACKED_KEYS)
            if self.rows == "pairs":
                keys.update(PACKED_SOURCE_KEYS)
        return keys

    def spec(self, split: str = "train", row_multiple: int = 1) -> Spec:
        """{key: ([rows, length], dtype)} of the largest batch of `split`: an LM's [B, data.seq_len];
        pairs' [B, data.buckets[-1]] (a token budget's rows being those of that bucket,
        max_tokens // length in a multiple of `row_multiple`). Evaluation gives pairs longer than
        the largest bucket one more length, which depends on the data; it is not in the spec.

        Raises:
          ValueError: data.max_tokens holds no row of the largest bucket.
        """
        length = self.buckets[-1] if self.rows == "pairs" else self.seq_len
        rows = self.batch_size
        if split == "train" and self.rows == "pairs" and self.max_tokens and not self.packing:
            rows = self.max_tokens // length // row_multiple * row_multiple
            if rows == 0:
                times = f" times the {row_multiple} parts every batch splits into" if row_multiple > 1 else ""
                raise ValueError(
                    f"data.max_tokens={self.max_tokens} is smaller than the {length} padded positions of the largest "
                    f"bucket{times}: raise data.max_tokens to at least {length * row_multiple}"
                )
        return {key: ((rows, length), dtype) for key, dtype in self.keys(split).items()}

    def example(self) -> Batch:
        """A batch of one row of two positions with the keys a model reads (no packed rows): the
        shapes that initialize its parameters, which depend on neither B nor T."""
        keys = self.keys("train", packed=False)
        return {key: (np.ones if key.endswith("mask") else np.zeros)((1, 2), dtype) for key, dtype in keys.items()}
