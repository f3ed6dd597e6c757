"""Batches of a corpus's token ids, index-addressed (`batch(i)` is a pure function of the data,
the seed and i): language-model rows (`lm`), length-bucketed pairs (`seq2seq`), packed rows
(`packing`), pairs filled to a token budget (`token_budget`), one line per row (`line_rows`),
the Grain loader that prefetches them (`loader`), and the batcher and batch spec a run's config
chooses for a split (`plan`).
"""

from seqjax.data.batching.lm import LMBatches, lm_eval_batches
from seqjax.data.batching.seq2seq import Seq2SeqBatches, pair_positions, seq2seq_eval_batches

__all__ = ["LMBatches", "Seq2SeqBatches", "lm_eval_batches", "pair_positions", "seq2seq_eval_batches"]
