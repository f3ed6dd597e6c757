"""A trained run's split, read for evaluation: from its token store when each of the split's files
is gone or holds what the store was made from, even where the corpus's relative paths now resolve
elsewhere (the store found by the run's fingerprint); read as it is now when a file changed."""

import json
import shutil

import numpy as np
import pytest

from seqjax.config import DataConfig
from seqjax.data import load_data, read_texts
from seqjax.data.datasets import encode_stream

SPLITS = {"train": "to be or not to be\nthat is the question\n" * 20, "test": "or not\nthe question is\n"}


@pytest.fixture
def trained(tmp_path, monkeypatch):
    """A text corpus under $SEQJAX_DATA=tmp_path/corpus, named by relative paths, prepared into
    the store cache as training does: (config, tokenizer, the test split's stored stream, the
    store's fingerprint)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, text in SPLITS.items():
        (corpus / f"{split}.txt").write_text(text)
    monkeypatch.setenv("SEQJAX_DATA", str(corpus))
    cfg = DataConfig(kind="text", train="train.txt", test="test.txt", tokenizer="word")
    data = load_data(cfg, echo=lambda _: None)
    return cfg, data.tokenizer, np.asarray(data.splits["test"]), data.fingerprint


def evaluated(cfg, tokenizer, fingerprint, notices=None):
    """(the test split's stream, the fingerprint of the store it was read from; None: encoded from its files)."""
    echo = (lambda _: None) if notices is None else notices.append
    data = load_data(cfg, tokenizer, fingerprint=fingerprint, splits=["test"], echo=echo)
    return np.asarray(data.splits["test"]), data.fingerprint


def assert_scored_from_the_store(run):
    """`run` (a `trained` or `sharded` tuple): its test split is read from its token store, without a notice."""
    cfg, tokenizer, stored, fingerprint = run
    notices = []
    got, source = evaluated(cfg, tokenizer, fingerprint, notices)
    np.testing.assert_array_equal(got, stored)
    assert source == fingerprint and notices == []


def test_the_split_is_read_from_the_store_when_its_text_is_gone(trained, tmp_path):
    shutil.rmtree(tmp_path / "corpus")
    assert_scored_from_the_store(trained)


def test_the_runs_store_is_found_by_its_fingerprint_where_the_paths_resolve_elsewhere(trained, tmp_path, monkeypatch):
    cfg, tokenizer, _, _ = trained
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path / "elsewhere"))  # test.txt now means a file that is not there
    assert_scored_from_the_store(trained)
    with pytest.raises(ValueError, match=r"data.test must name existing files, missing \[.*elsewhere/test.txt'\]"):
        evaluated(cfg, tokenizer, None)  # not the run's own corpus: no store stands in for it


def test_an_unchanged_copy_of_the_text_elsewhere_is_scored_from_the_store(trained, tmp_path, monkeypatch):
    shutil.copytree(tmp_path / "corpus", tmp_path / "copy")
    (tmp_path / "copy" / "train.txt").unlink()
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path / "copy"))
    assert_scored_from_the_store(trained)


def test_a_split_text_changed_since_the_store_was_made_is_scored_as_it_is_now(trained, tmp_path):
    cfg, tokenizer, stored, fingerprint = trained
    test = tmp_path / "corpus" / "test.txt"
    test.write_text("to be\n")
    notices = []
    got, source = evaluated(cfg, tokenizer, fingerprint, notices)
    np.testing.assert_array_equal(got, encode_stream(tokenizer, read_texts(test)))
    assert not np.array_equal(got, stored) and source is None
    assert notices == [
        f"notice: {test} (size 6 bytes, was 23): scoring the file as it is now, not the token store's copy of it"
    ]


@pytest.fixture
def sharded(tmp_path, monkeypatch):
    """As `trained`, the test split two JSONL shards under a relative glob pattern."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.jsonl").write_text(
        "".join(json.dumps({"text": line}) + "\n" for line in SPLITS["train"].splitlines())
    )
    for i, text in enumerate(["or not", "the question is"]):
        (corpus / f"test-{i}.jsonl").write_text(json.dumps({"text": text}) + "\n")
    monkeypatch.setenv("SEQJAX_DATA", str(corpus))
    cfg = DataConfig(kind="text", format="jsonl", train="train.jsonl", test="test-*.jsonl", tokenizer="word")
    data = load_data(cfg, echo=lambda _: None)
    return cfg, data.tokenizer, np.asarray(data.splits["test"]), data.fingerprint


def test_a_split_of_shards_some_gone_the_others_unchanged_elsewhere_is_scored_from_the_store(
    sharded, tmp_path, monkeypatch
):
    (tmp_path / "corpus" / "test-0.jsonl").unlink()
    (tmp_path / "corpus").rename(tmp_path / "moved")
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path / "moved"))
    assert_scored_from_the_store(sharded)


def test_a_shard_added_since_the_store_was_made_is_scored_with_the_others_as_they_are_now(sharded, tmp_path):
    cfg, tokenizer, stored, fingerprint = sharded
    added = tmp_path / "corpus" / "test-2.jsonl"
    added.write_text(json.dumps({"text": "to be"}) + "\n")
    notices = []
    got, source = evaluated(cfg, tokenizer, fingerprint, notices)
    np.testing.assert_array_equal(got, encode_stream(tokenizer, ["or not", "the question is", "to be"]))
    assert source is None
    assert notices == [
        f"notice: {added} (a new shard, matched by its split's pattern since the store was prepared): scoring the "
        "file as it is now, not the token store's copy of it"
    ]
