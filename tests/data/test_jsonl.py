"""The `jsonl` format: a JSON Lines corpus gives the ids of the same texts as lines (language
model and pairs in records, nested fields included), a run trains, evaluates and resumes on
shards of one and refuses a changed shard, and every bad record is one message naming the file
and line, whichever of the two parsers (the fast one, pyarrow's, and the reference, Python's
`json`) meets it first."""

import dataclasses
import gzip
import io
import json
import os
import shutil

import numpy as np
import pytest

from seqjax.cli import main
from seqjax.config import DataConfig
from seqjax.data import load_data, read_parallel, read_texts
from seqjax.data.corpora.jsonl import jsonl_blocks
from seqjax.data.corpora.readers import read_input

TEXTS = ["the cat sat", "a dög runs", "", "é — naïve", "the cat", "  spaced  ", "sat on a mat"]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
    return str(path)


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def records_of(texts):
    """Records as a crawl ships them: the text among other fields of other types."""
    return [{"id": i, "text": text, "meta": {"url": f"u{i}", "score": 0.5}} for i, text in enumerate(texts)]


def read_blocks(data: bytes, fields=("text",), block_bytes=1 << 20):
    return [list(block) for block in jsonl_blocks(io.BytesIO(data), "c.jsonl", fields, block_bytes=block_bytes)]


def test_a_jsonl_corpus_gives_the_ids_the_same_text_as_lines_gives(tmp_path):
    lines = {
        split: write_lines(tmp_path / f"{split}.txt", TEXTS[i:] * 20) for i, split in enumerate(("train", "valid"))
    }
    jsonl = {
        split: write_jsonl(tmp_path / f"{split}.jsonl", records_of(TEXTS[i:] * 20))
        for i, split in enumerate(("train", "valid"))
    }
    plain = load_data(DataConfig(kind="text", tokenizer="word", **lines))
    records = load_data(DataConfig(kind="text", tokenizer="word", format="jsonl", **jsonl))
    assert records.tokenizer.vocab == plain.tokenizer.vocab
    for split in ("train", "valid"):
        np.testing.assert_array_equal(records.splits[split], plain.splits[split])
    assert records.fingerprint != plain.fingerprint  # another store: the format and field are in its key


def test_pairs_in_records_read_the_fields_named_by_the_language_suffixes_or_given(tmp_path):
    sources, targets = TEXTS, [text[::-1] for text in TEXTS]
    write_lines(tmp_path / "train.en", sources)
    write_lines(tmp_path / "train.de", targets)
    flat = write_jsonl(tmp_path / "flat.jsonl", [{"de": t, "en": s, "id": 1} for s, t in zip(sources, targets)])
    nested = write_jsonl(tmp_path / "hf.jsonl", [{"translation": {"de": t, "en": s}} for s, t in zip(sources, targets)])
    two_files = load_data(DataConfig(kind="parallel", train=str(tmp_path / "train"), tokenizer="word"))
    for path, names in ((flat, ("", "")), (nested, ("translation.en", "translation.de"))):
        assert read_parallel(path, *(names if names[0] else ("en", "de")), format="jsonl") == (sources, targets)
        cfg = DataConfig(kind="parallel", format="jsonl", train=path, tokenizer="word")
        data = load_data(dataclasses.replace(cfg, src_field=names[0], tgt_field=names[1]))
        for side in (0, 1):
            assert [list(ids) for ids in data.splits["train"][side]] == [
                list(ids) for ids in two_files.splits["train"][side]
            ]
        assert list(data.references["train"]) == targets


def test_line_breaks_in_a_text_become_spaces_and_blank_lines_are_skipped():
    data = b'{"text": "two\\nparagraphs\\r\\nhere"}\n\n  \n{"text": "last"}'
    assert [text for block in read_blocks(data) for text in block] == ["two paragraphs here", "last"]


def test_a_byte_order_mark_and_crlf_line_ends_are_read_as_lines_reads_them():
    assert read_blocks(b'\xef\xbb\xbf{"text": "a"}\r\n{"text": "b"}\r\n  {"text": "c"}\n') == [["a", "b", "c"]]


@pytest.mark.parametrize("block_bytes", [1, 40, 1 << 20])
def test_blocks_of_any_size_give_every_record_in_order(block_bytes):
    data = "".join(json.dumps(r) + "\n" for r in records_of(TEXTS * 3)).encode()
    assert [t for block in read_blocks(data, block_bytes=block_bytes) for t in block] == TEXTS * 3


BAD_RECORDS = {
    "invalid JSON": (b'{"text": "b"\n', r"got invalid JSON in 'c.jsonl' at line {}: Expecting ',' delimiter"),
    "two objects on a line": (b'{"text": "b"}{"text": "c"}\n', r"got invalid JSON in 'c.jsonl' at line {}: Extra data"),
    "not an object": (b'["b"]\n', r"must be JSON objects, one a line, got an array in 'c.jsonl' at line {}"),
    "a missing field": (
        b'{"txt": "b", "id": 4}\n',
        r"field 'text', got none in 'c.jsonl' at line {}, whose fields are txt, id",
    ),
    "a number": (b'{"text": 5}\n', r"field 'text' must hold a string, got a number \(5\) in 'c.jsonl' at line {}"),
    "a null": (b'{"text": null}\n', r"field 'text' must hold a string, got null in 'c.jsonl' at line {}"),
    "a non-UTF-8 byte": (b'{"text": "\xff"}\n', r"undecodable bytes in 'c.jsonl' at line {} \(byte 10: b'\\xff'\)"),
    "a lone surrogate": (b'{"text": "\\udc00"}\n', r"valid Unicode string, got the lone surrogate .* at line {}"),
}
# The bad line in the file's one block (met by pyarrow, then read again by `json`), after a blank line
# (which sends its block to `json` directly), or in a later block than the first.
LAYOUTS = {"one block": (False, 1 << 20), "after a blank line": (True, 1 << 20), "a later block": (False, 30)}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("bad", list(BAD_RECORDS))
def test_a_bad_record_is_one_message_naming_the_file_and_line(bad, layout):
    (line, message), (blank, block_bytes) = BAD_RECORDS[bad], LAYOUTS[layout]
    data = b'{"text": "a"}\n' * 3 + b"\n" * blank + line + b'{"text": "z"}\n'
    with pytest.raises(ValueError, match=message.format(4 + blank)):
        read_blocks(data, block_bytes=block_bytes)


@pytest.mark.parametrize(
    "field, message",
    [
        ("body", r"field 'body', got none in .*c.jsonl' at line 1, whose fields are id, text, meta"),
        ("meta.title", r"field 'meta.title', got none .* whose fields are meta.url, meta.score"),
        ("text.body", r"field 'text.body', got 'text' holding a string in .* at line 1"),
    ],
)
def test_an_unknown_field_is_refused_listing_the_fields_the_records_have(tmp_path, field, message):
    path = write_jsonl(tmp_path / "c.jsonl", records_of(TEXTS))
    with pytest.raises(ValueError, match=message):
        read_texts(path, format="jsonl", field=field)


def test_generate_input_is_read_as_the_runs_corpus_its_text_field_included(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"prompt": text} for text in TEXTS])
    assert read_input(path, "--input", DataConfig(kind="text", format="jsonl", text_field="prompt")) == TEXTS


TINY_LM = [
    "data.kind=text",
    "data.format=jsonl",
    "data.tokenizer=word",
    "data.seq_len=8",
    "model.kind=nnlm",
    "model.d_model=16",
    "train.batch_size=8",
    "train.log_every=1",
    "train.eval_every=0",
    "train.checkpoint_every=2",
    "train.num_printed_samples=0",
]


@pytest.mark.slow
def test_a_run_trains_evaluates_and_resumes_on_jsonl_shards_as_on_their_text(tmp_path, capsys):
    corpus = {"train": TEXTS * 40, "valid": TEXTS * 4}
    shards = [corpus["train"][:150], corpus["train"][150:]]
    write_jsonl(tmp_path / "train-00000.jsonl", records_of(shards[0]))
    changed = tmp_path / "train-00001.jsonl.gz"  # shards as crawls ship them: some compressed
    changed.write_bytes(gzip.compress(open(write_jsonl(tmp_path / "raw", records_of(shards[1])), "rb").read()))
    jsonl = {
        "train": str(tmp_path / "train-*"),
        "valid": write_jsonl(tmp_path / "valid.jsonl", records_of(corpus["valid"])),
    }
    lines = {split: write_lines(tmp_path / f"{split}.txt", texts) for split, texts in corpus.items()}
    workdir = str(tmp_path / "run")
    settings = [*TINY_LM, *(f"data.{split}={path}" for split, path in jsonl.items())]
    assert main(["train", "--workdir", workdir, "--set", *settings, "train.steps=2"]) == 0
    cfg = DataConfig(kind="text", tokenizer="word", format="jsonl", **jsonl)
    plain = load_data(dataclasses.replace(cfg, format="lines", **lines))
    for split, stream in load_data(cfg).splits.items():
        np.testing.assert_array_equal(stream, plain.splits[split])

    def evaluate():
        capsys.readouterr()
        assert main(["eval", "--workdir", workdir, "--split", "valid"]) == 0
        return json.loads(capsys.readouterr().out.split("\n", 1)[1])["valid"]

    from_store = evaluate()
    shutil.rmtree(os.environ["SEQJAX_CACHE"])  # then from the split's JSONL file
    assert evaluate() == from_store
    assert main(["train", "--extend-schedule", "--workdir", workdir, "--set", *settings, "train.steps=4"]) == 0
    assert "resuming" in capsys.readouterr().out
    records = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    assert [r["step"] for r in records if r["split"] == "train"] == [1, 2, 3, 4]
    changed.write_bytes(gzip.compress(b'{"text": "another shard"}\n'))
    assert main(["train", "--extend-schedule", "--workdir", workdir, "--set", *settings, "train.steps=6"]) == 2
    assert f"source file {changed} (size" in capsys.readouterr().err
