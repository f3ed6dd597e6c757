"""Vocabularies and tokenizers: the special ids and `Vocabulary` (`vocab`), the tokenizers built
from training text, char, word and byte-level BPE (`trained`), a pretrained model's own
(`pretrained`), and the same tokenizers built and applied a block of lines at a time for a
corpus of any size (`streaming`, with `word_index` and `byte_level_pieces`)."""

from seqjax.data.tokenizers.trained import (
    BpeTokenizer,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
    build_tokenizer,
    load_tokenizer,
)
from seqjax.data.tokenizers.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, Vocabulary

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "UNK_ID",
    "BpeTokenizer",
    "CharTokenizer",
    "Tokenizer",
    "Vocabulary",
    "WordTokenizer",
    "build_tokenizer",
    "load_tokenizer",
]
