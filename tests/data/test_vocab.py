"""Vocabulary: fixed special ids, frequency order, counts, JSON round trip, id checks."""

import numpy as np
import pytest

from seqjax.data.tokenizers.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, Vocabulary


def _vocab(**kwargs) -> Vocabulary:
    return Vocabulary.from_counts({"b": 5, "a": 5, "c": 9, "d": 1}, num_lines=3, **kwargs)


def test_special_tokens_have_fixed_ids():
    vocab = _vocab()
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert [vocab.token(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_tokens_sorted_by_decreasing_count_ties_by_string():
    vocab = _vocab()
    assert vocab.tokens[4:] == ("c", "a", "b", "d")
    np.testing.assert_array_equal(vocab.counts, [0, 0, 3, 0, 9, 5, 5, 1])


def test_max_size_counts_specials_and_unk_counts_what_it_replaced():
    vocab = _vocab(max_size=6)
    assert vocab.tokens == SPECIAL_TOKENS + ("c", "a")
    assert vocab.counts[UNK_ID] == 5 + 1


def test_min_count_maps_rarer_tokens_to_unk():
    vocab = _vocab(min_count=2)
    assert "d" not in vocab
    assert vocab.id("d") == UNK_ID
    assert vocab.counts[UNK_ID] == 1


def test_json_round_trip_is_equal(tmp_path):
    vocab = Vocabulary.from_counts({"é": 2, "\n": 4, '"q"': 1}, num_lines=1)
    assert Vocabulary.from_json(vocab.to_json()) == vocab
    vocab.save(tmp_path / "vocab.json")
    assert Vocabulary.load(tmp_path / "vocab.json") == vocab


def test_check_ids_names_first_bad_value_and_position():
    vocab = _vocab()
    with pytest.raises(ValueError, match=r"targets must be ids in \[0, 8\), got 8 at position \(1, 0\)"):
        vocab.check_ids(np.array([[1, 2], [8, -1]]), "targets")
    with pytest.raises(ValueError, match=r"got -1 at position 2"):
        vocab.check_ids([0, 7, -1], "ids")


def test_check_ids_accepts_valid_ids():
    np.testing.assert_array_equal(_vocab().check_ids([0, 7], "ids"), [0, 7])


def test_constructor_refuses_missing_specials_and_duplicates():
    with pytest.raises(ValueError, match="must start with the special tokens"):
        Vocabulary(("a",), np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="distinct"):
        Vocabulary(SPECIAL_TOKENS + ("a", "a"), np.zeros(6, np.int64))


def test_max_size_not_above_specials_is_refused():
    with pytest.raises(ValueError, match="max_size must be 0"):
        _vocab(max_size=4)
