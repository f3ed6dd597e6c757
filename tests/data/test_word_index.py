"""Word tokens found and numbered with array operations equal the tokenizer's regular expression
on every code point, keep one id per piece across blocks, and refuse a hash collision."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.data.tokenizers import word_index
from seqjax.data.tokenizers.trained import WORD_PATTERN
from seqjax.data.tokenizers.word_index import WordIndex, count_words, hash_block

# Letters, digits and marks of several scripts, apostrophes, connector and other punctuation,
# and the whitespace Python knows beyond ASCII (file separators, NBSP, line separators).
_ALPHABET = "ab'’_-.,!“5²½\u0301\u093f\u203fé中ी \t\x0b\x0c\r\x1c\x1f\x85\xa0\u2028\u3000"


def _tokens(index: WordIndex, lines: list[str]) -> tuple[list[str], list[int]]:
    ids, lengths = index.encode(lines)
    return [index.pieces[i] for i in ids], lengths.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(_ALPHABET, max_size=30), min_size=1, max_size=6))
def test_tokens_and_line_lengths_equal_the_regular_expression(lines):
    tokens, lengths = _tokens(WordIndex(), lines)
    expected = [WORD_PATTERN.findall(line) for line in lines]
    assert tokens == [t for line in expected for t in line]
    assert lengths == [len(line) for line in expected]
    assert count_words("\n".join(lines)) == len("\n".join(lines).split())


def test_every_code_point_is_classed_as_python_does():
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and c != ord("\n")]
    random.Random(0).shuffle(points)
    text = "".join(map(chr, points))
    lines = [text[i : i + 50_000] for i in range(0, len(text), 50_000)]
    tokens, _ = _tokens(WordIndex(), lines)
    assert tokens == [t for line in lines for t in WORD_PATTERN.findall(line)]
    assert count_words(text) == len(text.split())


def test_a_piece_keeps_its_id_across_blocks_and_new_ones_get_the_next_ids():
    index = WordIndex()
    first, _ = index.encode(["the cat sat", "the mat"])
    assert first.tolist()[:4] == [first[0], first[1], first[2], first[0]]
    second, lengths = index.encode(["a cat", "", "don't sat!"])
    assert len(set(first.tolist())) == 4 and sorted(set(first.tolist())) == [0, 1, 2, 3]
    assert [index.pieces[i] for i in second] == ["a", "cat", "don't", "sat", "!"]
    assert second[1] == first[1] and second[3] == first[2]
    assert set(second.tolist()) - set(first.tolist()) == {4, 5, 6}
    assert lengths.tolist() == [2, 0, 3]


def test_blocks_hashed_ahead_number_as_encoded_in_order():
    lines = [f"w{i % 97} x{i % 13} , y{i}" for i in range(300)]
    blocks = [lines[i : i + 40] for i in range(0, 300, 40)]
    hashed = [hash_block(b) for b in reversed(blocks)][::-1]  # hashing order does not matter
    index, reference = WordIndex(), WordIndex()
    for block, lines_ in zip(hashed, blocks):
        got, want = index.number(block), reference.encode(lines_)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert index.pieces == reference.pieces


@pytest.mark.parametrize("lines", [["a b"], ["a", None]])
def test_a_first_hash_collision_is_refused_naming_both_pieces(monkeypatch, lines):
    _, second = word_index._hashes()
    monkeypatch.setattr(word_index, "_hashes", lambda: (lambda p, s, e: np.zeros(len(s), np.uint64), second))
    index = WordIndex()
    with pytest.raises(RuntimeError, match="'b' and 'a'|'a' and 'b'"):
        if lines[1:] == [None]:
            index.encode(["a"])
            index.encode(["b"])
        else:
            index.encode(lines)


def test_hash_powers_and_their_inverses_grow_as_a_pair():
    powers = word_index._Powers(3)
    up, down = powers.get(5)
    assert up.tolist() == [1, 3, 9, 27, 81] and np.all(up * down == 1)
    up, down = powers.get((1 << 23) + 2)  # a block longer than the first table
    assert len(up) == len(down) == (1 << 23) + 2 and np.all(up[-3:] * down[-3:] == 1)
