"""Tokenizers: round trips, <unk>, frequency-sorted ids with counts, save/load."""

import numpy as np
import pytest

from seqjax.data.tokenizers.trained import WordTokenizer, build_tokenizer, load_tokenizer
from seqjax.data.tokenizers.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

TEXTS = [
    "the cat sat on the mat.",
    "the dog, the cat; and the bird!",
    "héllo wörld  with  two spaces\tand a tab",
    "don't stop, cat",
]


def _encoded_counts(tokenizer, texts):
    ids = [i for text in texts for i in (*tokenizer.encode(text), EOS_ID)]
    return np.bincount(ids, minlength=tokenizer.vocab.size)


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_decode_reproduces_text(kind):
    tokenizer = build_tokenizer(kind, TEXTS, vocab_size=300)
    for text in TEXTS:
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_bpe_encodes_unseen_characters_without_unk():
    tokenizer = build_tokenizer("bpe", TEXTS, vocab_size=300)
    text = "Ω unseen ✓ text 😀"
    ids = tokenizer.encode(text)
    assert UNK_ID not in ids
    assert tokenizer.decode(ids) == text


def test_bpe_learns_merges_up_to_vocab_size():
    tokenizer = build_tokenizer("bpe", TEXTS * 5, vocab_size=280)
    assert 260 < tokenizer.vocab.size <= 280
    assert len(tokenizer.encode("the cat")) < len("the cat")


@pytest.mark.parametrize("kind", ["char", "word", "bpe"])
def test_counts_are_the_id_frequencies_of_the_encoded_training_text(kind):
    tokenizer = build_tokenizer(kind, TEXTS, vocab_size=300)
    np.testing.assert_array_equal(tokenizer.vocab.counts, _encoded_counts(tokenizer, TEXTS))


@pytest.mark.parametrize("kind", ["char", "word", "bpe"])
def test_ids_after_specials_are_sorted_by_decreasing_count(kind):
    counts = build_tokenizer(kind, TEXTS, vocab_size=300).vocab.counts[4:]
    assert np.all(np.diff(counts) <= 0)


def test_word_tokenizer_separates_punctuation_and_keeps_apostrophes():
    assert WordTokenizer.segment("don't stop, cat!") == ["don't", "stop", ",", "cat", "!"]


def test_word_round_trip_joins_tokens_and_rare_words_become_unk():
    tokenizer = build_tokenizer("word", TEXTS, min_count=2)
    ids = tokenizer.encode("the cat sat, the zebra")
    assert ids[2] == UNK_ID and ids[5] == UNK_ID
    assert tokenizer.decode(ids) == "the cat <unk>, the <unk>"


def test_char_vocab_size_caps_rare_characters_to_unk():
    tokenizer = build_tokenizer("char", TEXTS, vocab_size=10)
    assert tokenizer.vocab.size == 10
    assert UNK_ID in tokenizer.encode("zzz")


def test_decode_stops_at_eos_and_skips_pad_and_bos():
    tokenizer = build_tokenizer("char", ["ab"])
    a, b = tokenizer.encode("ab")
    assert tokenizer.decode([BOS_ID, a, PAD_ID, b, EOS_ID, a]) == "ab"


def test_decode_refuses_ids_outside_vocabulary():
    tokenizer = build_tokenizer("char", ["ab"])
    with pytest.raises(ValueError, match="got 99 at position 1"):
        tokenizer.decode([4, 99])


def test_words_counts_whitespace_separated_words():
    assert build_tokenizer("char", TEXTS).words("  two words\tthree ") == 3


@pytest.mark.parametrize("kind", ["char", "word", "bpe"])
def test_save_and_load_give_the_same_encoding(kind, tmp_path):
    tokenizer = build_tokenizer(kind, TEXTS, vocab_size=300)
    tokenizer.save(tmp_path / "tok")
    restored = load_tokenizer(tmp_path / "tok")
    assert restored.kind == kind and restored.vocab == tokenizer.vocab
    for text in TEXTS:
        assert restored.encode(text) == tokenizer.encode(text)
        assert restored.decode(restored.encode(text)) == tokenizer.decode(tokenizer.encode(text))


@pytest.mark.parametrize(
    "kind, texts, vocab_size, message",
    [
        ("piece", TEXTS, 0, "tokenizer kind must be one of"),
        ("bpe", TEXTS, 100, "vocab_size must be >= 260"),
        ("char", [], 0, "non-blank training text"),
        ("word", ["", "  "], 0, "non-blank training text"),
        ("char", "one string", 0, "sequence of lines"),
    ],
)
def test_build_refuses_bad_arguments(kind, texts, vocab_size, message):
    with pytest.raises(ValueError, match=message):
        build_tokenizer(kind, texts, vocab_size=vocab_size)


def test_load_refuses_directory_without_files(tmp_path):
    with pytest.raises(ValueError, match="must hold tokenizer.json and vocab.json"):
        load_tokenizer(tmp_path)
