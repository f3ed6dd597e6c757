"""The `parquet` format: a Parquet corpus gives the ids of the same texts as lines (language model
and pairs, a struct column as Hugging Face translation datasets nest them), read a row group and
a block of text at a time, and every bad input is one message naming the file (and the row)."""

import hashlib
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqjax.config import DataConfig
from seqjax.data import load_data, read_parallel, read_texts
from seqjax.data.corpora.parquet import parquet_blocks
from seqjax.data.corpora.readers import read_file_texts
from seqjax.data.store.prepare import ensure_store

TEXTS = ["the cat sat", "a dög runs", "", "é — naïve", "the cat", "  spaced  ", "sat on a mat"]


def write_parquet(path, columns, row_group_size=3):
    pq.write_table(pa.table(columns), str(path), row_group_size=row_group_size)
    return str(path)


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def read_blocks(path, fields=("text",), block_bytes=1 << 20):
    with open(path, "rb") as file:
        return [list(block) for block in parquet_blocks(file, str(path), fields, block_bytes=block_bytes)]


def test_a_parquet_corpus_gives_the_ids_the_same_text_as_lines_gives(tmp_path):
    lines, shards = {}, {}
    for i, split in enumerate(("train", "valid")):
        texts = TEXTS[i:] * 20
        lines[split] = write_lines(tmp_path / f"{split}.txt", texts)
        shards[split] = write_parquet(tmp_path / f"{split}.parquet", {"id": range(len(texts)), "text": texts})
    plain = load_data(DataConfig(kind="text", tokenizer="word", **lines))
    columns = load_data(DataConfig(kind="text", tokenizer="word", format="parquet", **shards))
    assert columns.tokenizer.vocab == plain.tokenizer.vocab
    for split in ("train", "valid"):
        np.testing.assert_array_equal(columns.splits[split], plain.splits[split])


def test_pairs_of_a_struct_column_read_as_hugging_face_translation_datasets_nest_them(tmp_path):
    sources, targets = TEXTS * 3, [text[::-1] for text in TEXTS * 3]
    write_lines(tmp_path / "train.en", sources)
    write_lines(tmp_path / "train.de", targets)
    pairs = [{"de": t, "en": s} for s, t in zip(sources, targets)]
    path = write_parquet(tmp_path / "train.parquet", {"translation": pairs}, row_group_size=4)
    assert read_parallel(path, "translation.en", "translation.de", format="parquet") == (sources, targets)
    two_files = load_data(DataConfig(kind="parallel", train=str(tmp_path / "train"), tokenizer="word"))
    fields = {"src_field": "translation.en", "tgt_field": "translation.de"}
    data = load_data(DataConfig(kind="parallel", format="parquet", train=path, tokenizer="word", **fields))
    for side in (0, 1):
        assert [list(ids) for ids in data.splits["train"][side]] == [
            list(ids) for ids in two_files.splits["train"][side]
        ]
    assert list(data.references["train"]) == targets


def test_a_file_read_in_two_passes_is_hashed_once_though_its_reader_seeks(tmp_path, monkeypatch):
    # The char tokenizer counts in a first pass, then encodes; Parquet's reader seeks, so its file's
    # hash is a read of its own, which the second pass must not repeat.
    path = write_parquet(tmp_path / "c.parquet", {"text": TEXTS * 5})
    digests, file_digest = [], hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda *a: digests.append(a) or file_digest(*a))
    ensure_store(DataConfig(kind="text", format="parquet", train=path, store=str(tmp_path / "s")), progress=False)
    assert len(digests) == 1


@pytest.mark.parametrize("block_bytes", [1, 25, 1 << 20])
def test_blocks_cut_by_text_size_give_every_row_in_order(tmp_path, block_bytes):
    path = write_parquet(tmp_path / "c.parquet", {"text": TEXTS * 5}, row_group_size=4)
    blocks = read_blocks(path, block_bytes=block_bytes)
    assert [text for block in blocks for text in block] == TEXTS * 5
    assert all(blocks)
    assert all(len(block) == 1 or sum(map(len, block)) <= block_bytes for block in blocks)


def test_line_breaks_in_a_text_become_spaces(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", {"text": ["two\nlines", "crlf\r\nend"]})
    assert read_texts(path, format="parquet") == ["two lines", "crlf end"]


@pytest.mark.parametrize(
    "field, message",
    [
        ("body", r"field 'body', got none in .*c.parquet', whose fields are id, text, "),
        ("translation.fr", r"fields are id, text, translation.en, translation.de$"),
        ("text.en", r"field 'text.en', got 'text' of the type string in .*c.parquet'$"),
    ],
)
def test_a_field_the_file_lacks_is_refused_listing_the_fields_it_has(tmp_path, field, message):
    path = write_parquet(tmp_path / "c.parquet", {"id": [1], "text": ["a"], "translation": [{"en": "a", "de": "b"}]})
    with pytest.raises(ValueError, match=message):
        read_texts(path, format="parquet", field=field)


def test_a_column_of_another_type_is_refused_naming_it(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", {"id": [1, 2], "text": ["a", "b"]})
    with pytest.raises(ValueError, match=r"field 'id' must hold strings, got the type int64 in .*c.parquet'"):
        read_texts(path, format="parquet", field="id")


def test_a_null_text_is_refused_naming_its_row(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", {"text": ["a", "b", "c", "d", None, "f"]}, row_group_size=3)
    with pytest.raises(ValueError, match=r"field 'text' must hold a string, got null in .*c.parquet' at row 5"):
        read_texts(path, format="parquet")


def test_a_null_pair_of_a_struct_column_is_refused_naming_its_row(tmp_path):
    pairs = [{"en": "a", "de": "b"}, None]
    path = write_parquet(tmp_path / "c.parquet", {"translation": pairs})
    with pytest.raises(ValueError, match=r"field 'translation.en' must hold a string, got null in .* at row 2"):
        read_parallel(path, "translation.en", "translation.de", format="parquet")


def test_undecodable_bytes_are_refused_naming_the_row(tmp_path):
    # Arrow builds a string column of these bytes without checking them; a writer may too.
    offsets = pa.array([0, 1, 2, 4], pa.int32()).buffers()[1]
    column = pa.Array.from_buffers(pa.string(), 3, [None, offsets, pa.py_buffer(b"ab\xc3\x28")])
    path = write_parquet(tmp_path / "c.parquet", {"text": column}, row_group_size=2)
    with pytest.raises(ValueError, match=r"undecodable bytes in .*c.parquet' at row 3 of field 'text'"):
        read_texts(path, format="parquet")


@pytest.mark.parametrize("content", [b"text, not a table\n" * 4, b"", b"PAR1"])
def test_a_file_that_is_not_parquet_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "c.parquet"
    path.write_bytes(content)
    with open(path, "rb") as file, pytest.raises(ValueError, match=r"files must be Parquet, got .*c.parquet', which"):
        list(parquet_blocks(file, str(path), ("text",)))


def test_standard_input_is_refused_as_parquet_it_cannot_be_sought(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", {"text": ["a"]})

    class Pipe(io.RawIOBase):  # what standard input is: read in order only
        def __init__(self, data):
            self.data = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, buffer):
            return self.data.readinto(buffer)

    with pytest.raises(ValueError, match="a Parquet file must be one that can be sought .*got '<stdin>'"):
        read_file_texts(io.BufferedReader(Pipe(open(path, "rb").read())), "<stdin>", format="parquet")
