"""Data generated in code from a seed: seq2seq tasks with a checkable answer (`tasks`), an
English-like grammar and its judge (`grammar`), and the oracle LM whose samples make a corpus
of known likelihood (`oracle`)."""

from seqjax.data.synthetic.grammar import grammar_sentences, is_grammatical
from seqjax.data.synthetic.tasks import SEQ2SEQ_TASKS, addition_task, copy_task, reverse_task, sort_task

__all__ = [
    "SEQ2SEQ_TASKS",
    "addition_task",
    "copy_task",
    "grammar_sentences",
    "is_grammatical",
    "reverse_task",
    "sort_task",
]
