"""Word tokens of a block of text found and numbered with array operations, not per word in Python.

The segmentation is `tokenizers.WordTokenizer`'s (`\\w+(?:'\\w+)*|[^\\w\\s]`, Python's `\\w`
and `\\s`) computed on the block's code points: a table of every code point's class (built
from Python's own regular expressions, so the two agree on every script), an apostrophe
between two word characters joined to them, and a token at each run of word characters
and at each other non-space character. Each token is then known by two 64-bit polynomial
hashes of its code points, computed for all tokens at once from prefix sums; the first
indexes the pieces seen so far, the second confirms every match, so two different pieces
get one id only if both hashes collide (about 2^-128 a pair). A collision of the first hash
alone is detected and refused. The piece's text is read only when it is first seen.
`hash_block` takes another segmentation too: byte-level BPE numbers its pre-tokens this way
(`byte_level_pieces`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable

import numpy as np

_SPACE, _WORD, _OTHER = 0, 1, 2
_APOSTROPHE = ord("'")
_NEWLINE = ord("\n")
_CODE_POINTS = 0x110000
_MOD = 1 << 64


def all_code_points() -> tuple[np.ndarray, str]:
    """Every code point but the surrogates, [1,112,064] int64, and the text of them in order."""
    points = np.concatenate([np.arange(0xD800), np.arange(0xE000, _CODE_POINTS)])
    return points, "".join(map(chr, points.tolist()))


@functools.cache
def _classes() -> np.ndarray:
    """[0x110000] uint8: each code point's class by Python's `\\s` and `\\w` (surrogates: other)."""
    table = np.full(_CODE_POINTS, _OTHER, np.uint8)
    points, text = all_code_points()
    for pattern, value in ((r"\s+", _SPACE), (r"\w+", _WORD)):
        for match in re.finditer(pattern, text):
            table[points[match.start() : match.end()]] = value
    return table


class _Powers:
    """Powers of an odd base and of its inverse modulo 2^64, grown on demand. Both arrays sit
    in one attribute, so a thread reading them while another grows them sees a matching pair."""

    def __init__(self, base: int):
        self.base, self.inverse = base, pow(base, -1, _MOD)
        self.table = (np.ones(1, np.uint64), np.ones(1, np.uint64))

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """base^j and base^-j for j < n: [n] uint64 each."""
        up, down = self.table
        if len(up) < n:
            size = max(n, 2 * len(up), 1 << 23)
            up, down = self.table = _powers(self.base, size), _powers(self.inverse, size)
        return up[:n], down[:n]


def _powers(base: int, n: int) -> np.ndarray:
    return np.concatenate([np.ones(1, np.uint64), np.cumprod(np.full(n - 1, base, np.uint64))])


class _Hash:
    """sum_j (c_j + 1) * base^(j - start) mod 2^64 over the code points c_j of every span [start, end)."""

    def __init__(self, base: int):
        self.powers = _Powers(base)

    def __call__(self, points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        up, down = self.powers.get(len(points) + 1)
        prefix = np.zeros(len(points) + 1, np.uint64)
        np.cumsum((points + 1).astype(np.uint64) * up[:-1], out=prefix[1:])
        result: np.ndarray = (prefix[ends] - prefix[starts]) * down[starts]
        return result


@dataclasses.dataclass(frozen=True)
class HashedBlock:
    """The pieces (word tokens, pre-tokens) of a block of lines, each known by its two hashes.

    text: the block's lines joined, each ended by "\n"; starts, ends: [n] int64 each token's
    code point span of it; per_line: [lines] int64 tokens of each line; keys: [k] uint64 the
    distinct first hashes, sorted; checks: [k] uint64 their second hashes; where: [k] int64 a
    token of each; inverse: [n] int64 each token's place in keys.
    """

    text: str
    starts: np.ndarray
    ends: np.ndarray
    per_line: np.ndarray
    keys: np.ndarray
    checks: np.ndarray
    where: np.ndarray
    inverse: np.ndarray

    def piece(self, token: int) -> str:
        return self.text[self.starts[token] : self.ends[token]]


Segmentation = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # code points -> starts, ends


def hash_block(lines: list[str], split: Segmentation | None = None) -> HashedBlock:
    """The `HashedBlock` of `lines` (none holds "\n"). Pure: it may run ahead on another
    thread while `WordIndex.number` numbers the block before.

    split: the pieces of the block's code points, as `segment` (the default) gives them; a
      piece never holds the "\n" between two lines.

    Raises:
      RuntimeError: two different pieces of the block share the first hash.
    """
    text = "\n".join(lines) + "\n"
    points = np.frombuffer(text.encode("utf-32-le"), np.uint32).astype(np.intp)
    starts, ends = (split or segment)(points)
    first_hash, second_hash = _hashes()
    first, second = first_hash(points, starts, ends), second_hash(points, starts, ends)
    first ^= (ends - starts).astype(np.uint64)  # spans of different lengths never share a hash
    order = np.argsort(first)
    ranked = first[order]
    heads = np.concatenate([ranked[:1] == ranked[:1], ranked[1:] != ranked[:-1]])
    inverse = np.empty(len(first), np.int64)
    inverse[order] = np.cumsum(heads) - 1
    per_line = np.diff(np.searchsorted(starts, np.flatnonzero(points == _NEWLINE)), prepend=0)
    block = HashedBlock(text, starts, ends, per_line, ranked[heads], second[order[heads]], order[heads], inverse)
    clash = np.flatnonzero(block.checks[inverse] != second)
    if len(clash):
        _collision(block.piece(int(clash[0])), block.piece(int(block.where[inverse[clash[0]]])))
    return block


class WordIndex:
    """Word pieces given provisional ids as blocks bring them: `pieces[i]` is id i's."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self._keys = np.zeros(0, np.uint64)  # first hashes of the pieces, sorted
        self._checks = np.zeros(0, np.uint64)  # their second hashes
        self._ids = np.zeros(0, np.int64)

    def encode(self, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Provisional ids [n] int64 of the word tokens of `lines` and the tokens of each line
        [len(lines)] int64."""
        return self.number(hash_block(lines))

    def number(self, block: HashedBlock) -> tuple[np.ndarray, np.ndarray]:
        """`encode` of the lines `block` was hashed from; the blocks of a corpus in order."""
        at = np.searchsorted(self._keys, block.keys)
        known = at < len(self._keys)
        known[known] = self._keys[at[known]] == block.keys[known]
        clash = np.flatnonzero(known)[self._checks[at[known]] != block.checks[known]]
        if len(clash):
            _collision(block.piece(int(block.where[clash[0]])), self.pieces[int(self._ids[at[clash[0]]])])
        ids = np.empty(len(block.keys), np.int64)
        ids[known] = self._ids[at[known]]
        new = np.flatnonzero(~known)  # in order of their keys, as the index keeps them
        ids[new] = len(self.pieces) + np.arange(len(new))
        self.pieces.extend(map(block.piece, block.where[new].tolist()))
        self._keys = np.insert(self._keys, at[new], block.keys[new])
        self._checks = np.insert(self._checks, at[new], block.checks[new])
        self._ids = np.insert(self._ids, at[new], ids[new])
        return ids[block.inverse], block.per_line


def _collision(piece: str, other: str) -> None:
    raise RuntimeError(f"the word pieces {piece!r} and {other!r} share a 64-bit hash; please report this text")


@functools.cache
def _hashes() -> tuple[_Hash, _Hash]:
    return _Hash(0x9E3779B97F4A7C15), _Hash(0xC2B2AE3D27D4EB4F)


def segment(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends [tokens] int64 (code point offsets, end exclusive) of the tokens of the
    text of code points `points` [n] int, in order: what `WordTokenizer.segment` finds."""
    classes = _classes()[points]
    word = classes == _WORD
    joined = word.copy()  # an apostrophe between two word characters is inside the word
    joined[1:-1] |= (points[1:-1] == _APOSTROPHE) & word[:-2] & word[2:]
    other = (classes == _OTHER) & ~joined
    before = np.concatenate([[False], joined[:-1]])
    after = np.concatenate([joined[1:], [False]])
    starts = np.flatnonzero(other | (joined & ~before))
    ends = np.flatnonzero(other | (joined & ~after)) + 1
    return starts, ends


def count_words(text: str) -> int:
    """Whitespace-separated words of `text`, as `len(text.split())` counts them."""
    points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    solid = _classes()[points] != _SPACE
    return int(np.count_nonzero(solid[1:] & ~solid[:-1]) + (len(solid) > 0 and solid[0]))
