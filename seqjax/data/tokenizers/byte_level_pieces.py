"""Byte-level BPE encoded a distinct piece at a time: each pre-token of GPT-2's pattern is
encoded by HF `tokenizers` once, when first seen, and its ids reused for every later copy.

Byte-level BPE never merges across the pieces its pre-tokenizer cuts (GPT-2's
`'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`, applied to each
line), and a piece cut alone is cut into itself, so a line's ids are its pieces' ids in
order. `segment` finds the pieces of a block with array operations on its code points,
classed as letter, number, space or other by the tokenizer's own regular-expression engine
(`_classes`), so the two agree on every code point; `PieceIndex` keeps the ids of every piece
seen. On a corpus whose words follow Zipf's law almost every piece has been seen before, so
the Rust encoder runs on a small fraction of the text.
"""

from __future__ import annotations

import functools

import numpy as np
from tokenizers import Regex, pre_tokenizers
from tokenizers import Tokenizer as HfTokenizer

from seqjax.data.tokenizers.word_index import HashedBlock, WordIndex, all_code_points

_LETTER, _NUMBER, _SPACE, _OTHER = 0, 1, 2, 3
_NEWLINE, _BLANK, _APOSTROPHE = ord("\n"), ord(" "), ord("'")
_SHORT_CONTRACTIONS = np.array([ord(c) for c in "stmd"])  # 's 't 'm 'd
_CODE_POINTS = 0x110000


@functools.cache
def _classes() -> np.ndarray:
    """[0x110000] uint8: each code point's class by HF's regex engine (`\\p{L}`, `\\p{N}`, `\\s`;
    surrogates: other), read off what a split on each class removes from all code points."""
    points, text = all_code_points()
    table = np.full(_CODE_POINTS, _OTHER, np.uint8)
    for pattern, value in ((r"\s", _SPACE), (r"\p{N}", _NUMBER), (r"\p{L}", _LETTER)):
        outside = np.zeros(len(points), bool)
        for _, (start, end) in pre_tokenizers.Split(Regex(pattern), behavior="removed").pre_tokenize_str(text):
            outside[start:end] = True
        table[points[~outside]] = value
    return table


def segment(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends [pieces] int64 (end exclusive) of the byte-level pre-tokens of the lines
    whose code points, each line ended by "\\n", are `points` [n] int: what HF's ByteLevel
    pre-tokenizer cuts from each line."""
    classes = _classes()[points]
    newline = points == _NEWLINE
    line_start = np.concatenate([[True], newline[:-1]])
    solid = classes != _SPACE  # "\n" is a space to the engine
    space = ~solid & ~newline
    blank = points == _BLANK
    attached = blank & np.concatenate([solid[1:], [False]])  # " ?" joins a blank to the piece after it
    before = np.concatenate([[_SPACE], classes[:-1]])
    space_before = np.concatenate([[False], space[:-1]])
    # A contraction starts where the scan can stop at an apostrophe: not inside a run of others
    # and not after a blank, which the others would take.
    blank_before = np.concatenate([[False], blank[:-1]])
    stops = line_start | (before == _LETTER) | (before == _NUMBER) | (space_before & ~blank_before)
    after1 = np.concatenate([points[1:], [_NEWLINE]])
    after2 = np.concatenate([points[2:], [_NEWLINE, _NEWLINE]])
    apostrophe = (points == _APOSTROPHE) & stops
    short = apostrophe & np.isin(after1, _SHORT_CONTRACTIONS)
    re_ve = ((after1 == ord("r")) | (after1 == ord("v"))) & (after2 == ord("e"))
    long = apostrophe & (re_ve | ((after1 == ord("l")) & (after2 == ord("l"))))
    length = np.where(long, 3, np.where(short, 2, 0))
    contraction = np.flatnonzero(length)
    run_start = solid & (line_start | (before != classes)) & ~np.concatenate([[False], attached[:-1]])
    run_start[contraction + 1] = False  # the contraction's letters belong to it
    starts = run_start | attached | newline
    starts[np.minimum(contraction + length[contraction], len(points) - 1)] = True  # letters after it start anew
    starts |= space & (line_start | ~space_before)  # a run of spaces
    # ... whose last space goes apart when the run is longer than one and a non-space follows
    starts |= space & space_before & np.concatenate([solid[1:], [False]])
    at = np.flatnonzero(starts)
    ends = np.concatenate([at[1:], [len(points)]])
    kept = ~newline[at]
    return at[kept], ends[kept]


class PieceIndex:
    """Every distinct pre-token seen, with its HF BPE ids, the encoder of a `BpeModel`'s blocks."""

    def __init__(self, model: HfTokenizer):
        self.model, self.pieces = model, WordIndex()
        self._ids = np.zeros(0, np.int64)  # the pieces' ids, one after another
        self._offsets = np.zeros(1, np.int64)  # piece i's ids: _ids[_offsets[i] : _offsets[i + 1]]

    def number(self, block: HashedBlock) -> tuple[np.ndarray, np.ndarray]:
        """HF ids [n] int64 of a block hashed with `segment`, and the ids of each line [lines] int64."""
        pieces, per_line = self.pieces.number(block)
        known = len(self._offsets) - 1
        new = self.pieces.pieces[known:]
        if new:
            encoded = [e.ids for e in self.model.encode_batch_fast(new)]
            counts = np.fromiter(map(len, encoded), np.int64, count=len(encoded))
            flat = np.fromiter((i for ids in encoded for i in ids), np.int64, count=int(counts.sum()))
            self._ids = np.concatenate([self._ids, flat])
            self._offsets = np.concatenate([self._offsets, self._offsets[-1] + np.cumsum(counts)])
        counts = np.diff(self._offsets)[pieces]
        ends = np.cumsum(counts)
        index = np.arange(ends[-1] if len(ends) else 0) + np.repeat(self._offsets[pieces] - (ends - counts), counts)
        line_ends = np.concatenate([[0], ends])[np.cumsum(per_line)]
        return self._ids[index], np.diff(line_ends, prepend=0)
