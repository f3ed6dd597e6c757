"""`shapes` of every kind of training batches: the [rows, length] of each batch it gives, every one
(a train step is compiled for each before the first step), and no shape that never occurs."""

import numpy as np
import pytest

from seqjax.data.batching.line_rows import LineBatches
from seqjax.data.batching.lm import LMBatches
from seqjax.data.batching.packing import PackedLMBatches, PackedSeq2SeqBatches
from seqjax.data.batching.seq2seq import Seq2SeqBatches
from seqjax.data.batching.token_budget import TokenBudgetBatches
from seqjax.data.tokenizers.vocab import EOS_ID

RNG = np.random.default_rng(0)
# A stream of lines of 1-6 tokens, each ended by </s>.
STREAM = np.concatenate([np.append(RNG.integers(4, 20, RNG.integers(1, 7)), EOS_ID) for _ in range(200)])
# Pairs of 1-13 tokens a side: buckets 4, 8 and 16 each hold some; bucket 32 holds none.
SRC = [RNG.integers(4, 20, RNG.integers(1, 14)).astype(np.int32) for _ in range(300)]
TGT = [RNG.integers(4, 20, RNG.integers(1, 14)).astype(np.int32) for _ in range(300)]

KINDS = {
    "lm": lambda: LMBatches(STREAM, 4, 8, seed=0),
    "packed_lm": lambda: PackedLMBatches(STREAM, 4, 8, seed=0),
    "lines": lambda: LineBatches(STREAM, 4, 8, seed=0),
    "seq2seq": lambda: Seq2SeqBatches(SRC, TGT, 8, (4, 8, 16, 32), seed=0),
    "token_budget": lambda: TokenBudgetBatches(SRC, TGT, 64, (4, 8, 16, 32), seed=0),
    "packed_seq2seq": lambda: PackedSeq2SeqBatches(SRC, TGT, 8, 16, seed=0),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_shapes_are_exactly_the_shapes_of_the_batches_of_two_epochs(kind):
    batches = KINDS[kind]()
    drawn = {batches.batch(i)["mask"].shape for i in range(2 * batches.batches_per_epoch)}
    assert sorted(drawn) == sorted(batches.shapes)


def test_a_bucket_without_a_full_batch_has_no_shape():
    batches = Seq2SeqBatches(SRC, TGT, 8, (4, 8, 16, 32), seed=0)
    assert [length for _, length in batches.shapes] == [4, 8, 16]
