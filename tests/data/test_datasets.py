"""load_data: validated config, encoded splits, tokenizers from train only or as given."""

import dataclasses
import typing

import numpy as np
import pytest

from seqjax.config import DataConfig
from seqjax.config.sections import DataKind
from seqjax.data.corpora.sources import SOURCES
from seqjax.data.datasets import LMData, ParallelData, load_data
from seqjax.data.synthetic import grammar_sentences
from seqjax.data.tokenizers.vocab import EOS_ID, UNK_ID

SMALL = DataConfig(num_train=100, num_eval=10, seed=3)


def _lines(stream: np.ndarray) -> list[np.ndarray]:
    ends = np.flatnonzero(stream == EOS_ID)
    return np.split(stream, ends + 1)[:-1]


def test_grammar_task_gives_one_sentence_per_line_of_the_stream():
    data = load_data(SMALL)
    assert isinstance(data, LMData) and set(data.splits) == {"train", "valid", "test"}
    train = data.splits["train"]
    assert train.dtype == np.int32 and train[-1] == EOS_ID
    sentences = grammar_sentences(100, (3, 0))
    assert [data.tokenizer.decode(line) for line in _lines(train)] == sentences
    assert data.words["train"] == sum(len(s.split()) for s in sentences) + len(sentences)


def test_vocabulary_counts_are_the_train_stream_frequencies():
    data = load_data(SMALL)
    counts = np.bincount(data.splits["train"], minlength=data.tokenizer.vocab.size)
    np.testing.assert_array_equal(data.tokenizer.vocab.counts, counts)


def test_synthetic_splits_are_deterministic_and_distinct():
    first, second = load_data(SMALL), load_data(SMALL)
    for split in first.splits:
        np.testing.assert_array_equal(first.splits[split], second.splits[split])
    assert not np.array_equal(first.splits["valid"], first.splits["test"])


def test_seq2seq_task_shares_one_tokenizer_and_keeps_raw_text():
    data = load_data(dataclasses.replace(SMALL, task="reverse"))
    assert isinstance(data, ParallelData)
    assert data.src_tokenizer is data.tgt_tokenizer
    for split, (src, tgt) in data.splits.items():
        assert [data.src_tokenizer.decode(s) for s in src] == data.sources[split]
        assert [data.tgt_tokenizer.decode(t) for t in tgt] == data.references[split]
        assert data.references[split] == [s[::-1] for s in data.sources[split]]


def test_given_tokenizers_are_used_instead_of_building_new_ones():
    data = load_data(dataclasses.replace(SMALL, task="addition"))
    other = load_data(dataclasses.replace(SMALL, task="addition", seed=9), data.tokenizers)
    assert other.tgt_tokenizer is data.tgt_tokenizer


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_text_tokenizer_is_built_from_train_only_and_missing_splits_are_left_out(tmp_path):
    cfg = DataConfig(
        kind="text", train=_write(tmp_path / "train.txt", "abc\nab\n"), valid=_write(tmp_path / "valid.txt", "abz\n")
    )
    data = load_data(cfg)
    assert set(data.splits) == {"train", "valid"}
    assert data.splits["valid"].tolist() == [data.tokenizer.vocab.id("a"), data.tokenizer.vocab.id("b"), UNK_ID, EOS_ID]


def test_parallel_train_pairs_longer_than_max_pair_len_are_dropped_but_eval_pairs_kept(tmp_path):
    for split in ("train", "dev"):
        _write(tmp_path / f"{split}.en", "a b\na b c d e\n")
        _write(tmp_path / f"{split}.de", "x\ny\n")
    cfg = DataConfig(
        kind="parallel", tokenizer="word", train=str(tmp_path / "train"), valid=str(tmp_path / "dev"), max_pair_len=3
    )
    data = load_data(cfg)
    assert data.src_tokenizer is not data.tgt_tokenizer
    assert {split: list(lines) for split, lines in data.sources.items()} == {
        "train": ["a b"],
        "valid": ["a b", "a b c d e"],
    }
    assert {split: list(lines) for split, lines in data.references.items()} == {"train": ["x"], "valid": ["x", "y"]}
    assert data.dropped == {"train": 1, "valid": 0}
    assert len(data.splits["train"][0]) == 1 and len(data.splits["valid"][1]) == 2


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"kind": "audio"}, "^data.kind must be one of synthetic, text, parallel, got 'audio'$"),
        ({"task": "translate"}, "^data.task must be one of grammar, oracle, copy, reverse, sort, addition, got"),
        (
            {"tokenizer": "sentencepiece"},
            "^data.tokenizer must be one of char, word, bpe, pretrained, got 'sentencepiece'$",
        ),
        ({"num_train": 0}, "data.num_train must be an int >= 1"),
        ({"seq_len": 0}, "data.seq_len must be an int >= 1"),
        ({"vocab_size": -1}, "data.vocab_size must be an int >= 0"),
        ({"buckets": (32, 16)}, "data.buckets must be strictly increasing"),
        ({"buckets": ()}, "data.buckets must be a non-empty tuple"),
        ({"kind": "text"}, "data.train must name the training file"),
        ({"kind": "text", "train": "/nonexistent/train.txt"}, r"data.train must name existing files"),
        ({"kind": "parallel", "train": "/x/train", "src": "en", "tgt": "en"}, "two different names"),
        ({"tokenizer": "bpe", "vocab_size": 100}, "data.vocab_size must be >= 260 for the bpe tokenizer"),
    ],
)
def test_invalid_config_is_refused_with_field_and_rule(changes, message):
    with pytest.raises(ValueError, match=message):
        load_data(dataclasses.replace(SMALL, **changes))


def test_every_data_kind_the_config_offers_has_its_facts():
    assert tuple(SOURCES) == typing.get_args(DataKind)


def test_wrong_number_of_tokenizers_is_refused():
    data = load_data(SMALL)
    with pytest.raises(ValueError, match=r"\(source, target\) pair"):
        load_data(dataclasses.replace(SMALL, task="copy"), data.tokenizers)


def test_relative_split_paths_are_read_under_data_root_or_seqjax_data(tmp_path, monkeypatch):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "train.txt").write_text("a b\nb a\n")
    cfg = DataConfig(kind="text", tokenizer="word", train="corpus/train.txt", root=str(tmp_path))
    assert load_data(cfg).splits["train"].size > 0
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path))
    assert load_data(dataclasses.replace(cfg, root="")).splits["train"].size > 0
    monkeypatch.delenv("SEQJAX_DATA")
    monkeypatch.chdir(tmp_path / "corpus")
    with pytest.raises(ValueError, match="corpus/train.txt"):
        load_data(dataclasses.replace(cfg, root=""))


def test_a_byte_order_mark_does_not_become_a_token(tmp_path):
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text("the cat\nthe dog\n", encoding="utf-8")
    marked.write_text("the cat\nthe dog\n", encoding="utf-8-sig")
    for tokenizer in ("word", "char"):
        vocabs = [
            load_data(DataConfig(kind="text", tokenizer=tokenizer, train=str(path))).tokenizer.vocab.tokens
            for path in (plain, marked)
        ]
        assert vocabs[0] == vocabs[1] and "\ufeff" not in vocabs[1]


def test_a_directory_given_as_a_split_says_it_is_a_directory(tmp_path):
    with pytest.raises(ValueError, match="data.train must name a file, got .*, which is a directory"):
        load_data(DataConfig(kind="text", train=str(tmp_path)))
    (tmp_path / "corpus").mkdir()
    with pytest.raises(ValueError, match=r"PREFIX.en and PREFIX.de, got .*corpus/', which is a directory \(looked for"):
        load_data(DataConfig(kind="parallel", train=str(tmp_path / "corpus") + "/"))


@pytest.mark.parametrize("kind", ["parallel", "synthetic"], ids=["token_store", "generated"])
def test_parallel_evaluation_splits_count_the_reference_words_plus_one_per_pair(tmp_path, kind):
    if kind == "parallel":
        _write(tmp_path / "train.en", "a b\nc\n")
        _write(tmp_path / "train.de", "x y\nz\n")
        _write(tmp_path / "dev.en", "a\nb c\nc\n")
        _write(tmp_path / "dev.de", "x y z\nz\n  y  x \n")
        cfg = DataConfig(kind="parallel", tokenizer="char", train=str(tmp_path / "train"), valid=str(tmp_path / "dev"))
        expected = {"valid": (3 + 1 + 2) + 3}
    else:
        cfg = dataclasses.replace(SMALL, task="copy")
    data = load_data(cfg)
    if kind == "synthetic":
        expected = {
            s: sum(len(t.split()) for t in data.references[s]) + len(data.references[s]) for s in ("valid", "test")
        }
    assert data.words == expected
