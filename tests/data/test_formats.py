"""Corpus formats: a format registered at run time is read everywhere a corpus file is (a run
trains and is evaluated on it through the CLI), a format whose records are pairs makes a parallel
corpus of one file, the content hash is the file's whatever order a reader reads it in, and a
`lines` corpus keeps the store location and fingerprint its stores were written under."""

import dataclasses
import hashlib
import io
import json
import os
import shutil

import numpy as np
import pytest

from seqjax.cli import main
from seqjax.config import DATA_FORMATS, DataConfig
from seqjax.data import load_data
from seqjax.data.corpora.formats import CorpusFormat, record_blocks
from seqjax.data.corpora.lines import line_blocks
from seqjax.data.corpora.readers import read_input, read_parallel
from seqjax.data.store.token_store import default_location, fingerprint, tokenization_config

WORDS = ["the cat", "a dog", "sees", "runs far", "and", "the bird sings"]


def reversed_lines(file, label, fields):
    """A toy format: each line holds its text reversed."""
    for block in line_blocks(file, label):
        yield [line[::-1] for line in block]


def tab_pairs(file, label, fields):
    """A toy format whose records are pairs: `source<TAB>target` a line (`fields` names none)."""
    for block in line_blocks(file, label):
        yield [tuple(line.split("\t", 1)) for line in block]


@pytest.fixture
def toy_formats():
    DATA_FORMATS.register("reversed_lines", CorpusFormat(reversed_lines))
    DATA_FORMATS.register("tab_pairs", CorpusFormat(tab_pairs, pairs_in_records=True))
    yield
    DATA_FORMATS.remove("reversed_lines")
    DATA_FORMATS.remove("tab_pairs")


def sentences(count, seed):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 5))) for _ in range(count)]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


TINY_LM = [
    "data.kind=text",
    "data.seq_len=16",
    "model.kind=nnlm",
    "model.d_model=16",
    "train.batch_size=8",
    "train.steps=3",
    "train.log_every=1",
    "train.eval_every=0",
    "train.checkpoint_every=3",
    "train.num_printed_samples=0",
]


def evaluate(workdir, capsys):
    """`seqjax eval` of the run in `workdir` on its valid split: the printed result."""
    capsys.readouterr()
    assert main(["eval", "--workdir", str(workdir), "--split", "valid"]) == 0
    return json.loads(capsys.readouterr().out.split("\n", 1)[1])["valid"]


@pytest.mark.slow
def test_a_format_registered_at_run_time_is_what_a_run_trains_and_is_evaluated_on(toy_formats, tmp_path, capsys):
    train, valid = sentences(300, 0), sentences(30, 1)
    corpus = {"train": train, "valid": valid}
    plain = DataConfig(kind="text", **{s: write(tmp_path / f"{s}.txt", lines) for s, lines in corpus.items()})
    flipped = {s: write(tmp_path / f"{s}.rev", [line[::-1] for line in lines]) for s, lines in corpus.items()}
    workdir = tmp_path / "run"
    settings = [*TINY_LM, "data.format=reversed_lines", *(f"data.{s}={path}" for s, path in flipped.items())]
    assert main(["train", "--workdir", str(workdir), "--set", *settings]) == 0
    trained = load_data(dataclasses.replace(plain, format="reversed_lines", **flipped))
    for split, stream in load_data(plain).splits.items():  # the run's store holds the texts, not the lines
        np.testing.assert_array_equal(trained.splits[split], stream)
    from_store = evaluate(workdir, capsys)
    shutil.rmtree(os.environ["SEQJAX_CACHE"])  # then the split's file, read through the format
    assert evaluate(workdir, capsys) == from_store
    assert read_input(flipped["valid"], "--input", DataConfig(kind="text", format="reversed_lines")) == valid


def test_a_format_of_pair_records_reads_a_parallel_corpus_of_one_file(toy_formats, tmp_path):
    sources, targets = sentences(40, 2), sentences(40, 3)
    write(tmp_path / "train.en", sources)
    write(tmp_path / "train.de", targets)
    write(tmp_path / "train.tsv", [f"{s}\t{t}" for s, t in zip(sources, targets)])
    assert read_parallel(str(tmp_path / "train.tsv"), "en", "de", format="tab_pairs") == (sources, targets)
    two_files = load_data(DataConfig(kind="parallel", train=str(tmp_path / "train"), tokenizer="word"))
    one_file = load_data(
        DataConfig(kind="parallel", format="tab_pairs", train=str(tmp_path / "train.tsv"), tokenizer="word")
    )
    for side in (0, 1):
        assert [list(ids) for ids in one_file.splits["train"][side]] == [
            list(ids) for ids in two_files.splits["train"][side]
        ]
    assert one_file.tokenizers[0].vocab == two_files.tokenizers[0].vocab


def test_a_removed_format_is_refused_naming_the_registered_ones(tmp_path):
    DATA_FORMATS.register("reversed_lines", CorpusFormat(reversed_lines))
    DATA_FORMATS.remove("reversed_lines")
    with pytest.raises(ValueError, match="data.format must be one of lines, jsonl, parquet, got 'reversed_lines'"):
        load_data(DataConfig(kind="text", format="reversed_lines", train=write(tmp_path / "t.txt", ["a b"])))


def test_the_content_hash_is_the_files_even_when_the_reader_seeks(tmp_path):
    path = write(tmp_path / "t.txt", sentences(2000, 4))  # longer than a read buffer
    expected = hashlib.sha256(open(path, "rb").read()).hexdigest()

    def last_line_first(file, label, fields):
        file.seek(-2, io.SEEK_END)
        yield [file.read().decode()]

    DATA_FORMATS.register("last_line_first", CorpusFormat(last_line_first))
    try:
        for format in ("lines", "last_line_first"):
            hashes, read = [], []
            list(record_blocks(path, format=format, hashed=hashes.append, progress=read.append))
            assert hashes == [expected]
            read_all = sum(read) == os.path.getsize(path)
            assert read_all if format == "lines" else not read_all
    finally:
        DATA_FORMATS.remove("last_line_first")


def test_a_lines_corpus_keeps_the_store_location_and_fingerprint_stores_were_written_under():
    # A store written before formats were registered records no format: its lines corpus must
    # still find it where it was written, under the same fingerprint (values from that version).
    cfg = DataConfig(kind="text", train="/corpus/train.txt", valid="/corpus/valid.txt", tokenizer="word")
    config = tokenization_config(cfg, {"train": "/corpus/train.txt", "valid": "/corpus/valid.txt"})
    sources = [{"path": "/corpus/train.txt", "size": 10, "sha256": "ab"}]
    assert os.path.basename(default_location(config)) == "store-8581c883a5ada0c5"
    assert fingerprint(config, sources) == "795bb6c7de58ccc88abea44bee0f17bdb6337e8893c2dda7c179c77ae195586a"
    other = tokenization_config(DataConfig(**{**vars(cfg), "format": "jsonl"}), {"train": "/corpus/train.txt"})
    assert other["format"] == "jsonl" and other["fields"] == ["text"]
