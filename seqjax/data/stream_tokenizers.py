"""Tokenizers built and applied a block of lines at a time, for corpora that do not fit in memory.

`train_streaming(kind, blocks, ...)` gives the tokenizer `tokenizers.build_tokenizer` would
give for the same lines (the same vocabulary, ids and counts), reading each block once and
keeping only the counts. `block_encoder(tokenizer)` maps a block of lines to flat ids and
per-line lengths, vectorized: char level through a sorted code-point table, word level
through one regular-expression pass over the block, BPE through HF `tokenizers`' batch
encoding in Rust.

Byte-level BPE is different in one way: its ids are frequency-sorted by the counts of the
encoded training text, which are known only once that text is encoded. So the BPE trainer
returns the HF model alone (`BpeModel`), the corpus is encoded once into HF ids, and
`BpeModel.tokenizer(counts, num_lines)` gives the tokenizer and the table that maps HF ids
to its ids afterwards.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import re
from collections.abc import Callable, Iterable, Iterator

import numpy as np
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import pre_tokenizers, trainers

from seqjax.data.tokenizers import (
    _WORD_PATTERN,
    BPE_MIN_VOCAB_SIZE,
    BpeTokenizer,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
)
from seqjax.data.vocab import SPECIAL_TOKENS, UNK_ID, Vocabulary

# Word tokens and the line ends between them, in one pass over a block's text.
_WORD_OR_NEWLINE = re.compile(_WORD_PATTERN.pattern + r"|\n")
Blocks = Iterable[list[str]]
# lines -> (ids [n] int64, lengths [lines] int64)
BlockEncoder = Callable[[list[str]], tuple[np.ndarray, np.ndarray]]


@dataclasses.dataclass
class BpeModel:
    """A trained HF byte-level BPE model whose pieces are not yet ranked by frequency."""

    model: HfTokenizer

    @property
    def size(self) -> int:
        return self.model.get_vocab_size()

    def tokenizer(self, counts: np.ndarray, num_lines: int) -> tuple[BpeTokenizer, np.ndarray]:
        """The tokenizer whose ids rank the pieces by `counts` ([size] int64, per HF id, in the
        encoded training text), and the table [size] int64 from HF ids to its ids."""
        index = self.model.get_vocab()
        pieces = sorted(index, key=index.__getitem__)  # piece of each HF id
        # Unused bytes and absorbed merges have count 0 yet keep an id, as in BpeTokenizer.train.
        vocab = Vocabulary.from_counts(dict(zip(pieces, counts.tolist())), num_lines=num_lines, min_count=0)
        return BpeTokenizer(vocab, self.model), np.array([vocab.id(p) for p in pieces], np.int64)


def _checked(blocks: Blocks) -> Iterator[list[str]]:
    """`blocks`, raising ValueError at the end when no line held non-blank text."""
    lines, text = 0, False
    for block in blocks:
        lines += len(block)
        text = text or any(line.strip() for line in block)
        yield block
    if not text:
        raise ValueError(f"training text must hold some non-blank line, got {lines} blank line(s)")


def train_streaming(
    kind: str, blocks: Blocks, *, vocab_size: int = 0, min_count: int = 1
) -> tuple[Tokenizer | BpeModel, int]:
    """The tokenizer of the training lines in `blocks` and their number of lines.

    kind 'char' | 'word': the tokenizer `build_tokenizer(kind, lines, ...)` builds;
    'bpe': a `BpeModel` (the vocabulary comes from the encoded text, see the module doc).
    """
    num_lines = 0

    def counted() -> Iterator[list[str]]:
        nonlocal num_lines
        for block in _checked(blocks):
            num_lines += len(block)
            yield block

    if kind == "bpe":
        if vocab_size < BPE_MIN_VOCAB_SIZE:
            raise ValueError(f"vocab_size must be >= {BPE_MIN_VOCAB_SIZE} for byte-level BPE, got {vocab_size}")
        model = BpeTokenizer._untrained_model()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size - len(SPECIAL_TOKENS),
            min_frequency=min_count,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=[],
            show_progress=False,
        )
        model.train_from_iterator(counted(), trainer)
        return BpeModel(model), num_lines
    counts: collections.Counter[str] = collections.Counter()
    for block in counted():
        if kind == "char":
            counts.update("".join(block))
        else:
            counts.update(_WORD_PATTERN.findall("\n".join(block)))
    vocab = Vocabulary.from_counts(counts, num_lines=num_lines, max_size=vocab_size, min_count=min_count)
    return (CharTokenizer(vocab) if kind == "char" else WordTokenizer(vocab)), num_lines


def _line_ends(ids: np.ndarray, mark: int) -> tuple[np.ndarray, np.ndarray]:
    """ids without the `mark` after each line, and the lengths of the lines."""
    ends = np.flatnonzero(ids == mark)
    lengths = np.diff(ends, prepend=-1) - 1
    return ids[ids != mark], lengths.astype(np.int64)


def _char_encoder(vocab: Vocabulary) -> BlockEncoder:
    points = np.array([ord(t) for t in vocab.tokens[len(SPECIAL_TOKENS) :]], np.int64)
    order = np.argsort(points)
    keys, values = points[order], order + len(SPECIAL_TOKENS)

    def encode(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        text = "\n".join(lines) + "\n"
        cps = np.frombuffer(text.encode("utf-32-le"), np.uint32).astype(np.int64)
        at = np.minimum(np.searchsorted(keys, cps), max(len(keys) - 1, 0))
        ids = np.where(keys[at] == cps, values[at], UNK_ID) if len(keys) else np.full(len(cps), UNK_ID)
        return _line_ends(np.where(cps == ord("\n"), -1, ids), -1)

    return encode


def _word_encoder(vocab: Vocabulary) -> BlockEncoder:
    index = {token: i for i, token in enumerate(vocab.tokens)}
    index["\n"] = -1

    def encode(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        tokens = _WORD_OR_NEWLINE.findall("\n".join(lines) + "\n")
        ids = np.fromiter(map(index.get, tokens, itertools.repeat(UNK_ID)), np.int64, count=len(tokens))
        return _line_ends(ids, -1)

    return encode


def _hf_encoder(model: HfTokenizer) -> BlockEncoder:
    def encode(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encoded = [e.ids for e in model.encode_batch_fast(lines)]
        lengths = np.fromiter(map(len, encoded), np.int64, count=len(encoded))
        ids = np.fromiter(itertools.chain.from_iterable(encoded), np.int64, count=int(lengths.sum()))
        return ids, lengths

    return encode


def block_encoder(tokenizer: Tokenizer | BpeModel) -> BlockEncoder:
    """Encodes a block of lines: (ids [n] int64, lengths [lines] int64), ids of the tokenizer,
    or HF ids for a `BpeModel` (and a `BpeTokenizer`, whose HF ids its table maps)."""
    if isinstance(tokenizer, BpeModel):
        return _hf_encoder(tokenizer.model)
    if isinstance(tokenizer, BpeTokenizer):
        return _hf_encoder(tokenizer.model)
    if isinstance(tokenizer, CharTokenizer):
        return _char_encoder(tokenizer.vocab)
    return _word_encoder(tokenizer.vocab)
