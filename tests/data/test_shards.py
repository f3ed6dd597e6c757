"""Corpus files as researchers ship them: gzip and zstd files read as they are (known by their
first bytes), a split given as a glob of shards read in sorted order as one corpus whose every
shard the token store's fingerprint covers (a changed, removed or added shard is named), a
failed prepare that leaves no store, and the checks of the record-field keys."""

import glob
import gzip
import json
import os

import numpy as np
import pytest
import zstandard

from seqjax.config import DataConfig
from seqjax.data import load_data, read_texts
from seqjax.data.corpora.readers import read_file_texts
from seqjax.data.store.prepare import ensure_store
from seqjax.data.store.token_store import tokenization_config

TEXTS = ["the cat sat", "a dög runs", "é — naïve", "the cat", "sat on a mat"]


def jsonl_bytes(texts):
    return "".join(json.dumps({"text": text}) + "\n" for text in texts).encode()


def write(path, data: bytes):
    path.write_bytes(data)
    return str(path)


COMPRESSORS = {
    "gzip": gzip.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.mark.parametrize("codec", list(COMPRESSORS))
@pytest.mark.parametrize("format", ["lines", "jsonl"])
def test_a_compressed_file_reads_as_its_content_whatever_its_name(tmp_path, codec, format):
    content = jsonl_bytes(TEXTS) if format == "jsonl" else "\n".join(TEXTS).encode()
    compress = COMPRESSORS[codec]
    for name in ("corpus.gz", "corpus.zst", "corpus"):  # the first bytes tell, not the extension
        path = write(tmp_path / name, compress(content))
        assert read_texts(path, format=format) == TEXTS
    with open(path, "rb") as file:  # standard input too
        assert read_file_texts(file, "<stdin>", format=format) == TEXTS


@pytest.mark.parametrize("codec", list(COMPRESSORS))
def test_a_file_of_several_gzip_members_or_zstd_frames_is_read_whole(tmp_path, codec):
    compress = COMPRESSORS[codec]
    path = write(tmp_path / "c", compress(jsonl_bytes(TEXTS[:2])) + compress(jsonl_bytes(TEXTS[2:])))
    assert read_texts(path, format="jsonl") == TEXTS


@pytest.mark.parametrize("codec", list(COMPRESSORS))
def test_truncated_compressed_data_is_refused_naming_the_file(tmp_path, codec):
    path = write(tmp_path / "c.gz", COMPRESSORS[codec](jsonl_bytes(TEXTS * 50))[:-20])
    with pytest.raises(ValueError, match=f"{codec} data must be whole and valid, got .*c.gz', which is not"):
        read_texts(path, format="jsonl")


def test_a_compressed_corpus_prepares_the_store_of_its_content(tmp_path):
    plain = write(tmp_path / "train.jsonl", jsonl_bytes(TEXTS * 20))
    packed = write(tmp_path / "train.jsonl.zst", COMPRESSORS["zstd"](jsonl_bytes(TEXTS * 20)))
    stores = [load_data(DataConfig(kind="text", format="jsonl", tokenizer="word", train=p)) for p in (plain, packed)]
    np.testing.assert_array_equal(stores[0].splits["train"], stores[1].splits["train"])


def shards(tmp_path, count=3, name="train"):
    """`count` JSONL shards, written last one first."""
    paths = [str(tmp_path / f"{name}-{i:05d}.jsonl") for i in range(count)]
    for i in reversed(range(count)):
        write(tmp_path / os.path.basename(paths[i]), jsonl_bytes([f"{text} {i}" for text in TEXTS]))
    return paths


def test_a_glob_of_shards_reads_them_in_sorted_order_as_one_corpus(tmp_path, monkeypatch):
    paths = shards(tmp_path)
    listed = glob.glob
    monkeypatch.setattr(glob, "glob", lambda pattern: sorted(listed(pattern), reverse=True))  # a file system's order
    pattern = str(tmp_path / "train-*.jsonl")
    expected = [text for path in paths for text in read_texts(path, format="jsonl")]
    assert read_texts(pattern, format="jsonl") == expected
    data = load_data(DataConfig(kind="text", format="jsonl", tokenizer="word", train=pattern))
    concatenated = write(tmp_path / "all.txt", "".join(f"{t}\n" for t in expected).encode())
    np.testing.assert_array_equal(
        data.splits["train"], load_data(DataConfig(kind="text", tokenizer="word", train=concatenated)).splits["train"]
    )


def test_the_store_records_every_shard_of_a_pattern(tmp_path):
    paths = shards(tmp_path)
    cfg = DataConfig(kind="text", format="jsonl", train=str(tmp_path / "train-*.jsonl"), store=str(tmp_path / "s"))
    store = ensure_store(cfg, progress=False)
    assert [source["path"] for source in store.manifest["sources"]] == paths
    assert store.manifest["splits"]["train"]["text"]["lines"] == 3 * len(TEXTS)


@pytest.mark.parametrize(
    "change, named, why",
    [
        ("edit", 1, "size"),
        ("remove", 2, "missing"),
        ("add", 3, "a new shard"),
    ],
)
def test_a_resumed_run_refuses_a_corpus_whose_shards_changed_naming_the_shard(tmp_path, change, named, why):
    paths = shards(tmp_path)
    cfg = DataConfig(kind="text", format="jsonl", train=str(tmp_path / "train-*.jsonl"), store=str(tmp_path / "s"))
    fingerprint = ensure_store(cfg, progress=False).fingerprint
    if change == "edit":
        write(tmp_path / os.path.basename(paths[1]), jsonl_bytes(["changed"]))
    elif change == "remove":
        os.remove(paths[2])
    else:
        write(tmp_path / "train-00003.jsonl", jsonl_bytes(["added"]))
    shard = str(tmp_path / f"train-{named:05d}.jsonl")
    with pytest.raises(ValueError, match=f"source file {shard} \\({why}.*changed since this run's token store"):
        ensure_store(cfg, expected=fingerprint, progress=False)
    messages = []  # a new run prepares the store again, saying why
    again = ensure_store(cfg, echo=messages.append, progress=False)
    assert shard in messages[0] and again.fingerprint != fingerprint


def test_a_pattern_that_matches_no_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"data.train must match existing files, got the pattern .*nothing-\*.jsonl'"):
        load_data(DataConfig(kind="text", format="jsonl", train=str(tmp_path / "nothing-*.jsonl")))
    with pytest.raises(ValueError, match=r"--input must name existing files, got the pattern .*nothing-\*"):
        read_texts(str(tmp_path / "nothing-*"), name="--input")


def test_a_parallel_corpus_in_two_files_takes_no_pattern(tmp_path):
    for side in ("en", "de"):
        write(tmp_path / f"train-0.{side}", b"a\n")
    with pytest.raises(ValueError, match=r"data.train must be a prefix of two files .* got the pattern"):
        load_data(DataConfig(kind="parallel", train=str(tmp_path / "train-*")))


def test_a_failed_prepare_leaves_no_store(tmp_path):
    train = write(tmp_path / "train.jsonl", jsonl_bytes(TEXTS * 20_000))  # several blocks
    valid = write(tmp_path / "valid.jsonl", jsonl_bytes(TEXTS * 9) + b'{"text": 1}\n')  # read after train's arrays
    cfg = DataConfig(kind="text", format="jsonl", train=train, valid=valid, store=str(tmp_path / "stores" / "lm"))
    with pytest.raises(ValueError, match=r"got a number \(1\) in .*valid.jsonl' at line 46"):
        ensure_store(cfg, progress=False)
    assert os.listdir(tmp_path / "stores") == []  # neither a store nor its temporary directory


def test_the_fields_read_decide_the_store(tmp_path):
    cfg = DataConfig(kind="text", format="jsonl", train="/c/train.jsonl")
    paths = {"train": "/c/train.jsonl"}
    assert tokenization_config(cfg, paths) != tokenization_config(
        DataConfig(**{**vars(cfg), "text_field": "body"}), paths
    )
    parallel = DataConfig(kind="parallel", format="jsonl", train="/c/train.jsonl")
    assert tokenization_config(parallel, paths)["fields"] == ["en", "de"]


@pytest.mark.parametrize(
    "keys, message",
    [
        (
            {"format": "lines", "text_field": "body"},
            r"data.text_field='body' names a field of records, which "
            r"data.format=lines does not have \(jsonl, parquet do\)",
        ),  # fmt: skip
        (
            {"format": "jsonl", "text_field": "a..b"},
            r"data.text_field: a field must be names joined by dots, got 'a..b'",
        ),
        ({"format": "jsonl", "text_field": ""}, r"data.text_field: a field must be names joined by dots, got ''"),
        ({"kind": "parallel", "format": "jsonl", "src_field": "de"}, r"two different fields, got \('de', 'de'\)"),
    ],
)
def test_record_field_keys_are_checked_naming_the_key_and_rule(tmp_path, keys, message):
    train = write(tmp_path / "train.jsonl", jsonl_bytes(TEXTS))
    with pytest.raises(ValueError, match=message):
        load_data(DataConfig(**{"kind": "text", "train": train, **keys}))
