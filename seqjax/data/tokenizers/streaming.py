"""Tokenizers built and applied a block of lines at a time, for corpora that do not fit in memory.

The result is the tokenizer `tokenizers.build_tokenizer` builds from the same lines (the
same vocabulary, ids and counts), with only one block and the counts in memory. Encoding is
vectorized: char level through a sorted code-point table, word level through array
operations on the block's code points (`word_index`), byte-level BPE through the same for its
pre-tokens, each distinct one encoded by HF `tokenizers` once (`byte_level_pieces`). An
encoder has a pure stage, which `prepare` runs on the next blocks on background threads, and
a stage that numbers the blocks in order; `ahead` runs the pure stage of the next blocks on
background threads while one is numbered.

Char level counts its characters in a first pass (`train_streaming`) and encodes in a
second. Word level and byte-level BPE rank their ids by the counts of the encoded training
text, so they encode it once into provisional ids (`WordModel`: as blocks bring the words;
`BpeModel`: HF's, after training BPE from an iterator) and `tokenizer(counts, num_lines)`
then gives the tokenizer and the table from provisional ids to its ids: the corpus is
never encoded twice.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from tokenizers import Tokenizer as HfTokenizer

from seqjax.data.tokenizers import byte_level_pieces
from seqjax.data.tokenizers.byte_level_pieces import PieceIndex
from seqjax.data.tokenizers.trained import BpeTokenizer, CharTokenizer, Tokenizer, WordTokenizer
from seqjax.data.tokenizers.vocab import SPECIAL_TOKENS, UNK_ID, Vocabulary
from seqjax.data.tokenizers.word_index import WordIndex, hash_block

Blocks = Iterable[list[str]]
T = TypeVar("T")
R = TypeVar("R")
Encoded = tuple[np.ndarray, np.ndarray]  # ids [n] int64, tokens of each line [lines] int64


def _done(encoded: Encoded) -> Encoded:
    return encoded


@dataclasses.dataclass(frozen=True)
class BlockEncoder:
    """Encodes a block of lines as `finish(stage(lines))`. `stage` is pure and may run ahead
    on another thread; `finish` takes the blocks of a corpus in order."""

    stage: Callable[[list[str]], Any]
    finish: Callable[[Any], Encoded] = _done


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


@dataclasses.dataclass
class WordModel:
    """Word pieces numbered as the corpus is encoded (one pass); `tokenizer(counts, num_lines)`
    then ranks the train split's pieces by frequency, as `WordTokenizer.train` does, and maps
    provisional ids to its ids."""

    vocab_size: int
    min_count: int
    index: WordIndex = dataclasses.field(default_factory=WordIndex)

    @property
    def size(self) -> int:
        """Provisional ids given so far."""
        return len(self.index.pieces)

    def tokenizer(self, counts: np.ndarray, num_lines: int) -> tuple[WordTokenizer, np.ndarray]:
        """The tokenizer of the pieces counted `counts` ([size] int64) in the train split's
        `num_lines` lines, and the table [size] int64 from provisional ids to its ids (pieces
        it leaves out, by min_count or vocab_size, to `<unk>`)."""
        pieces = self.index.pieces
        vocab = Vocabulary.from_counts(
            dict(zip(pieces, counts.tolist())), num_lines=num_lines, max_size=self.vocab_size, min_count=self.min_count
        )
        return WordTokenizer(vocab), np.array([vocab.id(p) for p in pieces], np.int64)


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
) -> tuple[CharTokenizer | WordModel | BpeModel, int]:
    """The tokenizer of the training lines in `blocks` and their number of lines.

    kind 'char': the tokenizer `build_tokenizer(kind, lines, ...)` builds; 'bpe': a
    `BpeModel`; 'word': a `WordModel`, reading nothing: the pass that encodes the train split
    also counts its words (for both, the vocabulary comes from the encoded text).
    """
    if kind == "word":
        return WordModel(vocab_size, min_count), 0
    num_lines = 0

    def counted() -> Iterator[list[str]]:
        nonlocal num_lines
        for block in _checked(blocks):
            num_lines += len(block)
            yield block

    if kind == "bpe":
        model = BpeTokenizer.trained_model(counted(), vocab_size=vocab_size, min_count=min_count)
        return BpeModel(model), num_lines
    counts: collections.Counter[str] = collections.Counter()
    for block in counted():
        counts.update("".join(block))
    return CharTokenizer(
        Vocabulary.from_counts(counts, num_lines=num_lines, max_size=vocab_size, min_count=min_count)
    ), num_lines


def _line_ends(ids: np.ndarray, mark: int) -> tuple[np.ndarray, np.ndarray]:
    """ids without the `mark` after each line, and the lengths of the lines."""
    ends = np.flatnonzero(ids == mark)
    lengths = np.diff(ends, prepend=-1) - 1
    return ids[ids != mark], lengths.astype(np.int64)


def _char_encoder(vocab: Vocabulary) -> Callable[[list[str]], Encoded]:
    points = np.array([ord(t) for t in vocab.tokens[len(SPECIAL_TOKENS) :]], np.int64)
    order = np.argsort(points)
    keys, values = points[order], order + len(SPECIAL_TOKENS)

    def encode(lines: list[str]) -> Encoded:
        text = "\n".join(lines) + "\n"
        cps = np.frombuffer(text.encode("utf-32-le"), np.uint32).astype(np.int64)
        at = np.minimum(np.searchsorted(keys, cps), max(len(keys) - 1, 0))
        ids = np.where(keys[at] == cps, values[at], UNK_ID) if len(keys) else np.full(len(cps), UNK_ID)
        return _line_ends(np.where(cps == ord("\n"), -1, ids), -1)

    return encode


def given_encoder(tokenizer: Tokenizer) -> BlockEncoder:
    """Encodes blocks of lines with a whole tokenizer (data.tokenizer=pretrained), through its
    `encode_batch`, each line framed as its stream holds it (`Framing.in_stream`): its ids are final."""

    def encode(lines: list[str]) -> Encoded:
        encoded = [tokenizer.framing.in_stream(ids) for ids in tokenizer.encode_batch(lines)]
        lengths = np.array([len(ids) for ids in encoded], np.int64)
        return np.fromiter((i for ids in encoded for i in ids), np.int64, int(lengths.sum())), lengths

    return BlockEncoder(encode)


def block_encoder(model: CharTokenizer | WordModel | BpeModel) -> BlockEncoder:
    """Encodes blocks of lines into (ids [n] int64, lengths [lines] int64): a char tokenizer's
    ids, a `WordModel`'s provisional ids or a `BpeModel`'s HF ids (which their tables map)."""
    if isinstance(model, BpeModel):
        pieces = functools.partial(hash_block, split=byte_level_pieces.segment)
        return BlockEncoder(pieces, PieceIndex(model.model).number)
    if isinstance(model, WordModel):
        return BlockEncoder(hash_block, model.index.number)
    return BlockEncoder(_char_encoder(model.vocab))


def ahead(items: Iterable[T], work: Callable[[T], R], workers: int = 2) -> Iterator[tuple[T, R]]:
    """(item, work(item)) for each of `items` in order, `work` running on the next items in
    `workers` background threads while the caller handles the current one. `work` must be
    pure; its array operations (numpy's, HF tokenizers') run without the interpreter lock, so
    the threads use as many cores. Raises what `items` or `work` raised, at that item."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ahead") as pool:
        pending: collections.deque = collections.deque()
        try:
            for item in items:
                pending.append((item, pool.submit(work, item)))
                if len(pending) > workers:
                    done, future = pending.popleft()
                    yield done, future.result()
            while pending:
                done, future = pending.popleft()
                yield done, future.result()
        finally:
            for _, future in pending:
                future.cancel()
