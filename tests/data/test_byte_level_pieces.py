"""Byte-level BPE encoded a distinct pre-token at a time equals HF's encoding of each line:
the same pre-tokens on every code point, the same ids, and each piece sent to HF once."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.data.tokenizers.byte_level_pieces import PieceIndex, segment
from seqjax.data.tokenizers.trained import BpeTokenizer
from seqjax.data.tokenizers.word_index import hash_block

# Contraction letters, apostrophes, blanks and other spaces, digits, marks and letters of
# several scripts, and others: every branch of GPT-2's pre-tokenizer pattern.
_ALPHABET = "abslrvetmd'’ _-.,!“5²½\u0301\u093fé中ी\t\x0b\x0c\r\x1c\x1f\x85\xa0\u2028\u3000"


@pytest.fixture(scope="module")
def model():
    rng = random.Random(0)
    lines = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    return BpeTokenizer.trained_model(lines, vocab_size=400, min_count=1)


def _pieces(line: str) -> list[tuple[int, int]]:
    points = np.frombuffer((line + "\n").encode("utf-32-le"), np.uint32).astype(np.intp)
    return list(zip(*(a.tolist() for a in segment(points))))


def _encoded(model, lines: list[str]) -> tuple[list[int], list[int]]:
    ids, lengths = PieceIndex(model).number(hash_block(lines, split=segment))
    return ids.tolist(), lengths.tolist()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(_ALPHABET, max_size=40), min_size=1, max_size=6))
def test_pieces_and_ids_equal_hf_on_each_line(model, lines):
    for line in lines:
        assert _pieces(line) == [offsets for _, offsets in model.pre_tokenizer.pre_tokenize_str(line)]
    want = [e.ids for e in model.encode_batch_fast(lines)]
    assert _encoded(model, lines) == ([i for ids in want for i in ids], [len(ids) for ids in want])


@pytest.mark.slow
def test_every_code_point_is_classed_as_hf_does(model):
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and c != ord("\n")]
    random.Random(1).shuffle(points)
    text = "".join(map(chr, points))
    # Blanks and apostrophes between the code points reach every rule at every class boundary.
    lines = [" " + text[i : i + 20_000].replace("x", "x 's' ") for i in range(0, len(text), 20_000)]
    want = [e.ids for e in model.encode_batch_fast(lines)]
    assert _encoded(model, lines) == ([i for ids in want for i in ids], [len(ids) for ids in want])


class _Counting:
    """A model whose encode_batch_fast calls are recorded."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def encode_batch_fast(self, texts):
        self.calls.append(list(texts))
        return self.model.encode_batch_fast(texts)


def test_each_distinct_piece_goes_to_hf_once_across_blocks(model):
    counting = _Counting(model)
    index = PieceIndex(counting)
    first, _ = index.number(hash_block(["ab ab'd", ""], split=segment))
    second, lengths = index.number(hash_block(["ab'd ab", "ab"], split=segment))
    assert sorted(p for call in counting.calls for p in call) == sorted(["ab", " ab", "'d"])
    want = [e.ids for e in model.encode_batch_fast(["ab'd ab", "ab"])]
    assert second.tolist() == [i for ids in want for i in ids] and lengths.tolist() == [len(i) for i in want]
    assert len(counting.calls) == 1  # the second block held no new piece
