"""Data, one sub-package per job: vocabularies and tokenizers (`tokenizers/`), corpus files, where
they are and how each format is read (`corpora/`), the token store a corpus is tokenized into
once (`store/`), data generated in code from a seed (`synthetic/`), and index-addressed batches
(`batching/`); `load_data` (`datasets`) turns a `DataConfig` into encoded splits.

Everything here runs on the host (numpy); it validates what users supply before any of it
reaches a jitted function.
"""

from seqjax.data import tokenizers
from seqjax.data.batching import LMBatches, Seq2SeqBatches, lm_eval_batches, seq2seq_eval_batches
from seqjax.data.corpora.readers import read_parallel, read_texts
from seqjax.data.corpora.sources import holds_pairs, validate_data_config
from seqjax.data.datasets import LMData, ParallelData, load_data
from seqjax.data.synthetic import (
    SEQ2SEQ_TASKS,
    addition_task,
    copy_task,
    grammar_sentences,
    is_grammatical,
    reverse_task,
    sort_task,
)

# the tokenizer names, listed once: in tokenizers.__all__
from seqjax.data.tokenizers import *  # noqa: F403

__all__ = [
    "SEQ2SEQ_TASKS",
    "LMBatches",
    "LMData",
    "ParallelData",
    "Seq2SeqBatches",
    "addition_task",
    "copy_task",
    "grammar_sentences",
    "holds_pairs",
    "is_grammatical",
    "lm_eval_batches",
    "load_data",
    "read_parallel",
    "read_texts",
    "reverse_task",
    "seq2seq_eval_batches",
    "sort_task",
    "validate_data_config",
]
__all__ += tokenizers.__all__
