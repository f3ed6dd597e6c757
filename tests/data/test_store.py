"""The token store: prepared corpora give the ids, streams and batches of the in-memory path,
round-trip their text, and bad input (killed or failed prepares, changed sources, a full
disk, undecodable bytes, empty splits, foreign directories) is refused clearly."""

import errno
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from seqjax.config import DataConfig
from seqjax.data import LMBatches, Seq2SeqBatches, build_tokenizer, load_data, read_parallel, read_texts
from seqjax.data.corpora.lines import BLOCK_BYTES, line_blocks
from seqjax.data.datasets import encode_stream
from seqjax.data.store import prepare as prepare_lib
from seqjax.data.store.prepare import ensure_store
from seqjax.data.store.token_store import FORMAT_VERSION, MANIFEST, token_dtype
from seqjax.data.tokenizers.vocab import EOS_ID

WORDS = ["the", "cat", "sat", "on", "a", "mat", "don't", "über", "naïve", "run", "3.5", "—"]


def _line(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9))) + rng.choice(["", ".", ",", " !", " “x”"])


def _write(path, lines, *, bom=False, crlf=False):
    text = ("\r\n" if crlf else "\n").join(lines) + "\n"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return str(path)


@pytest.fixture
def corpus(tmp_path):
    """A text LM corpus (train, valid with a BOM and CRLF ends) and a parallel one."""
    rng = random.Random(0)
    train = _write(tmp_path / "train.txt", [_line(rng) for _ in range(600)])
    valid = _write(tmp_path / "valid.txt", [_line(rng) for _ in range(60)], bom=True, crlf=True)
    for split, n in (("train", 500), ("valid", 40)):
        sources = [_line(rng) for _ in range(n)]
        _write(tmp_path / f"{split}.en", sources)
        _write(tmp_path / f"{split}.de", [" ".join(reversed(s.split())) for s in sources])
    return tmp_path, train, valid


def _lm(train, valid, **keys) -> DataConfig:
    return DataConfig(kind="text", train=train, valid=valid, **keys)


@pytest.mark.parametrize("tokenizer, vocab_size", [("char", 0), ("word", 0), ("word", 12), ("bpe", 300)])
def test_stored_stream_equals_the_in_memory_encoding(corpus, tokenizer, vocab_size):
    _, train, valid = corpus
    data = load_data(_lm(train, valid, tokenizer=tokenizer, vocab_size=vocab_size), echo=lambda _: None)
    reference = build_tokenizer(tokenizer, read_texts(train), vocab_size=vocab_size)
    assert data.tokenizer.vocab == reference.vocab  # same ids, same unigram counts
    for split, path in (("train", train), ("valid", valid)):
        stream = encode_stream(reference, read_texts(path))
        np.testing.assert_array_equal(data.splits[split], stream)
        assert data.splits[split].dtype == np.uint16 and isinstance(data.splits[split], np.memmap)
        lines = read_texts(path)
        assert data.words[split] == sum(len(line.split()) for line in lines) + len(lines)
    stored, in_memory = LMBatches(data.splits["train"], 4, 8, 3), LMBatches(stream_of(reference, train), 4, 8, 3)
    for index in (0, 5, in_memory.batches_per_epoch + 1):
        for key, value in in_memory.batch(index).items():
            np.testing.assert_array_equal(stored.batch(index)[key], value)
            assert stored.batch(index)[key].dtype == value.dtype


def stream_of(tokenizer, path):
    return encode_stream(tokenizer, read_texts(path))


@pytest.mark.parametrize("tokenizer, vocab_size", [("word", 0), ("bpe", 280)])
def test_stored_pairs_give_the_in_memory_batches(corpus, tokenizer, vocab_size):
    root, _, _ = corpus
    cfg = DataConfig(
        kind="parallel", train=str(root / "train"), valid=str(root / "valid"), tokenizer=tokenizer,
        vocab_size=vocab_size, max_pair_len=7, buckets=(4, 8),
    )  # fmt: skip
    data = load_data(cfg, echo=lambda _: None)
    sources, targets = read_parallel(str(root / "train"), "en", "de")
    src_tok = build_tokenizer(tokenizer, sources, vocab_size=vocab_size)
    tgt_tok = build_tokenizer(tokenizer, targets, vocab_size=vocab_size)
    assert (data.src_tokenizer.vocab, data.tgt_tokenizer.vocab) == (src_tok.vocab, tgt_tok.vocab)
    src = [np.array(ids, np.int32) for ids in src_tok.encode_batch(sources)]
    tgt = [np.array(ids, np.int32) for ids in tgt_tok.encode_batch(targets)]
    keep = [i for i in range(len(src)) if len(src[i]) <= 7 and len(tgt[i]) <= 7]
    assert 0 < len(keep) < len(src) and data.dropped["train"] == len(src) - len(keep)
    assert list(data.references["train"]) == [targets[i] for i in keep]
    assert list(data.sources["valid"]) == read_texts(str(root / "valid.en"))
    stored = Seq2SeqBatches(*data.splits["train"], 6, cfg.buckets, 1)
    in_memory = Seq2SeqBatches([src[i] for i in keep], [tgt[i] for i in keep], 6, cfg.buckets, 1)
    assert stored.dropped == in_memory.dropped
    for index in range(in_memory.batches_per_epoch + 2):
        for key, value in in_memory.batch(index).items():
            np.testing.assert_array_equal(stored.batch(index)[key], value)


def test_offsets_index_every_line_of_a_corpus_several_blocks_long(tmp_path):
    rng = np.random.default_rng(0)
    words = np.array(WORDS)
    lines = [" ".join(words[rng.integers(0, len(words), rng.integers(0, 12))]) for _ in range(110_000)]
    train = _write(tmp_path / "train.txt", lines)
    assert os.path.getsize(train) > 2 * BLOCK_BYTES  # three blocks: offsets must carry over two boundaries
    store = ensure_store(DataConfig(kind="text", train=train, tokenizer="word"), echo=lambda _: None, progress=False)
    expected = [ids + [EOS_ID] for ids in store.tokenizer().encode_batch(lines)]
    np.testing.assert_array_equal(store.array("train.offsets"), np.cumsum([0] + [len(ids) for ids in expected]))
    np.testing.assert_array_equal(store.stream("train"), np.concatenate(expected))


@pytest.mark.parametrize("tokenizer", ["char", "bpe"])
def test_store_round_trips_the_text(corpus, tokenizer):
    _, train, valid = corpus
    data = load_data(_lm(train, valid, tokenizer=tokenizer, vocab_size=300 if tokenizer == "bpe" else 0))
    store = ensure_store(_lm(train, valid, tokenizer=tokenizer, vocab_size=300 if tokenizer == "bpe" else 0))
    offsets = store.array("valid.offsets")
    lines = [data.tokenizer.decode(data.splits["valid"][a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    assert lines == read_texts(valid)


def test_token_dtype_is_uint16_up_to_65536_ids_else_uint32(tmp_path):
    assert token_dtype(1 << 16) == np.uint16 and token_dtype((1 << 16) + 1) == np.uint32
    # 70,000 distinct characters: a char vocabulary over 65,536 ids
    characters = [chr(0x10000 + i) for i in range(70_000)]
    path = _write(tmp_path / "wide.txt", ["".join(characters[i : i + 1000]) for i in range(0, 70_000, 1000)])
    data = load_data(DataConfig(kind="text", train=path), echo=lambda _: None)
    assert data.tokenizer.vocab.size > 1 << 16 and data.splits["train"].dtype == np.uint32
    assert data.tokenizer.decode(data.splits["train"][:1000]) == "".join(characters[:1000])


def test_prepare_reuses_a_store_and_rebuilds_one_whose_source_changed(corpus):
    root, train, valid = corpus
    cfg = _lm(train, valid, tokenizer="word")
    messages = []
    first = ensure_store(cfg, echo=messages.append, progress=False)
    assert ensure_store(cfg, echo=messages.append, progress=False).fingerprint == first.fingerprint
    assert len(messages) == 1  # prepared once, then reused
    with open(train, "a") as file:
        file.write("a brand new line\n")
    rebuilt = ensure_store(cfg, echo=messages.append, progress=False)
    assert "changed" in messages[-1] and train in messages[-1]
    assert rebuilt.fingerprint != first.fingerprint and rebuilt.path == first.path


@pytest.mark.parametrize("tokenizer", ["char", "word"])
def test_the_manifest_records_each_sources_content_hash(tmp_path, tokenizer):
    fingerprints = []
    for name, text in (("a", b"a b c\n"), ("x", b"x y z\n")):
        (tmp_path / "train.txt").write_bytes(text)
        cfg = DataConfig(
            kind="text", train=str(tmp_path / "train.txt"), tokenizer=tokenizer, store=str(tmp_path / name)
        )
        store = ensure_store(cfg, echo=lambda _: None, progress=False)
        assert store.manifest["sources"][0]["sha256"] == hashlib.sha256(text).hexdigest()
        fingerprints.append(store.fingerprint)
    assert fingerprints[0] != fingerprints[1]


def rewrite_keeping_mtime(path, text: bytes) -> None:
    """`text` into `path`, its size and modification time as they were (as `cp -p` or `rsync -t` of
    another version of the file leave them)."""
    before = os.stat(path)
    assert len(text) == before.st_size
    with open(path, "wb") as file:
        file.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_source_rewritten_with_its_mtime_kept_is_prepared_again(tmp_path):
    (tmp_path / "train.txt").write_bytes(b"a b c\n")
    cfg = DataConfig(kind="text", train=str(tmp_path / "train.txt"), tokenizer="word", store=str(tmp_path / "lm"))
    first = ensure_store(cfg, echo=lambda _: None, progress=False)
    rewrite_keeping_mtime(tmp_path / "train.txt", b"x y z\n")
    messages = []
    again = ensure_store(cfg, echo=messages.append, progress=False)
    assert "content changed" in messages[0] and again.fingerprint != first.fingerprint
    assert "x" in again.tokenizer().vocab.tokens and "a" not in again.tokenizer().vocab.tokens


def test_a_resumed_run_refuses_a_source_rewritten_with_its_mtime_kept(tmp_path):
    (tmp_path / "train.txt").write_bytes(b"a b c\n")
    cfg = DataConfig(kind="text", train=str(tmp_path / "train.txt"), tokenizer="word", store=str(tmp_path / "lm"))
    fingerprint = ensure_store(cfg, echo=lambda _: None, progress=False).fingerprint
    rewrite_keeping_mtime(tmp_path / "train.txt", b"x y z\n")
    with pytest.raises(ValueError, match="source file .*train.txt .its content changed.* changed since"):
        ensure_store(cfg, expected=fingerprint, progress=False)


def test_a_resumed_run_refuses_a_changed_source_naming_it(corpus):
    _, train, valid = corpus
    cfg = _lm(train, valid, tokenizer="word")
    fingerprint = ensure_store(cfg, progress=False).fingerprint
    assert load_data(cfg, fingerprint=fingerprint).fingerprint == fingerprint
    with open(valid, "a") as file:
        file.write("changed\n")
    with pytest.raises(ValueError, match=f"source file {valid}.*changed"):
        load_data(cfg, fingerprint=fingerprint)


def test_a_store_prepared_from_other_sources_is_refused_on_resume(corpus, tmp_path):
    _, train, valid = corpus
    cfg = _lm(train, valid, tokenizer="char", store=str(tmp_path / "mine"))
    fingerprint = ensure_store(cfg, progress=False).fingerprint
    os.rename(tmp_path / "mine", tmp_path / "elsewhere")  # the store is gone, the source edited
    with open(train, "a") as file:
        file.write("zzz\n")
    with pytest.raises(ValueError, match="holds other ids"):
        load_data(cfg, fingerprint=fingerprint, echo=lambda _: None)


@pytest.mark.parametrize("failure", ["killed", "disk_full"])
def test_a_failed_prepare_leaves_no_store_and_the_next_one_completes(corpus, tmp_path, monkeypatch, failure):
    _, train, valid = corpus
    cfg = _lm(train, valid, tokenizer="word", store=str(tmp_path / "stores" / "lm"))
    calls = []
    original = prepare_lib.to_npy

    def fail_midway(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:  # some arrays written, others not
            raise KeyboardInterrupt if failure == "killed" else OSError(errno.ENOSPC, "No space left on device")
        return original(*args, **kwargs)

    monkeypatch.setattr(prepare_lib, "to_npy", fail_midway)
    expected = (KeyboardInterrupt, None) if failure == "killed" else (ValueError, "disk .* is full")
    with pytest.raises(expected[0], match=expected[1]):
        ensure_store(cfg, progress=False)
    assert os.listdir(tmp_path / "stores") == []  # neither a store nor its temporary directory
    monkeypatch.setattr(prepare_lib, "to_npy", original)
    assert ensure_store(cfg, progress=False).manifest["splits"]["train"]["text"]["lines"] == 600


def test_a_half_written_temporary_store_is_never_used(corpus, tmp_path):
    _, train, valid = corpus
    stores = tmp_path / "stores"
    stale = stores / ".lm.tmp-killed"  # what a prepare killed by SIGKILL leaves
    stale.mkdir(parents=True)
    (stale / "train.tokens.bin").write_bytes(b"\0" * 10)
    store = ensure_store(_lm(train, valid, store=str(stores / "lm")), progress=False)
    assert store.path == str(stores / "lm") and len(store.stream("train")) > 10


def test_temporary_stores_of_killed_prepares_are_removed_and_live_ones_kept(corpus, tmp_path):
    _, train, valid = corpus
    stores, host = tmp_path / "stores", socket.gethostname()
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid names a process that is gone
    two_days_ago = time.time() - 2 * 24 * 3600
    made = {
        f".lm.tmp-{host}-{finished.pid}-k1ll3d00": False,
        f".lm.tmp-{host}-{finished.pid}-k1ll3d00.old": False,
        f".lm.tmp-{host}-{os.getppid()}-l1ve0000": True,  # a live process of this host
        ".lm.tmp-elsewhere-12-fresh000": True,  # another host's, recently written
        ".lm.tmp-elsewhere-12-stale000": False,  # another host's, untouched for two days
        f".other.tmp-{host}-{finished.pid}-n0tm1ne0": True,  # another store's
    }
    for name in made:
        (stores / name).mkdir(parents=True)
        (stores / name / "train.tokens.bin").write_bytes(b"\0" * 10)
        if "stale" in name:
            for path in (stores / name / "train.tokens.bin", stores / name):
                os.utime(path, (two_days_ago, two_days_ago))
    messages = []
    ensure_store(_lm(train, valid, store=str(stores / "lm")), echo=messages.append, progress=False)
    assert sorted(os.listdir(stores)) == sorted(["lm", *(name for name, kept in made.items() if kept)])
    assert sum("left by a prepare that was killed" in m for m in messages) == 3


def test_a_directory_without_manifest_is_refused_and_an_old_format_rebuilt(corpus, tmp_path):
    _, train, valid = corpus
    (tmp_path / "notastore").mkdir()
    with pytest.raises(ValueError, match="not a token store .no manifest.json"):
        ensure_store(_lm(train, valid, store=str(tmp_path / "notastore")))
    cfg = _lm(train, valid, store=str(tmp_path / "lm"))
    ensure_store(cfg, progress=False)
    manifest = json.loads((tmp_path / "lm" / MANIFEST).read_text())
    (tmp_path / "lm" / MANIFEST).write_text(json.dumps({**manifest, "format": FORMAT_VERSION - 1}))
    messages = []
    assert ensure_store(cfg, echo=messages.append, progress=False).manifest["format"] == FORMAT_VERSION
    assert "has format 0" in messages[0]


def test_a_store_of_another_data_config_is_refused(corpus, tmp_path):
    _, train, valid = corpus
    ensure_store(_lm(train, valid, store=str(tmp_path / "lm")), progress=False)
    with pytest.raises(ValueError, match="another data config .tokenizer: store has 'char', now 'word'"):
        ensure_store(_lm(train, valid, tokenizer="word", store=str(tmp_path / "lm")))


def test_undecodable_bytes_are_refused_with_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\n" * 5 + b"bad \xff byte\n")
    with pytest.raises(ValueError, match=f"undecodable bytes in '{path}' at line 6"):
        load_data(DataConfig(kind="text", train=str(path)))
    with pytest.raises(ValueError, match="at line 6"), open(path, "rb") as file:  # a block boundary inside the file
        list(line_blocks(file, str(path), block_bytes=7))


def test_blocks_give_the_lines_read_texts_gives(tmp_path):
    path = _write(tmp_path / "x.txt", ["a\r", "", "ü" * 9, "last"], bom=True, crlf=True)
    with open(path, "ab") as file:
        file.write(b"no line end")
    for size in (1, 3, 64, 1 << 20):
        with open(path, "rb") as file:
            assert [line for block in line_blocks(file, path, block_bytes=size) for line in block] == read_texts(path)


def test_empty_or_blank_splits_are_refused(tmp_path):
    blank = _write(tmp_path / "blank.txt", ["", "  "])
    with pytest.raises(ValueError, match="non-blank line"):
        load_data(DataConfig(kind="text", train=blank))
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="must not be empty"):
        load_data(DataConfig(kind="text", train=_write(tmp_path / "t.txt", ["x"]), valid=str(tmp_path / "empty.txt")))
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf")
    with pytest.raises(ValueError, match="data.valid must hold at least one line"):
        load_data(DataConfig(kind="text", train=_write(tmp_path / "t.txt", ["x"]), valid=str(tmp_path / "bom.txt")))


def test_a_train_split_of_three_blank_lines_is_refused_counting_three(tmp_path):
    (tmp_path / "blank.txt").write_bytes(b"\n\n\n")
    with pytest.raises(ValueError, match=r"got 3 blank line\(s\)"):
        load_data(DataConfig(kind="text", train=str(tmp_path / "blank.txt")))


def test_a_store_another_process_just_prepared_is_kept(corpus, tmp_path):
    _, train, valid = corpus
    cfg = _lm(train, valid, store=str(tmp_path / "lm"))
    first = ensure_store(cfg, progress=False)
    marker = tmp_path / "lm" / "kept"
    marker.write_text("")
    # a second process finishing its own prepare of the same corpus
    assert prepare_lib.prepare_store(cfg, cfg.store, progress=False).fingerprint == first.fingerprint
    assert marker.exists()  # the store in place, equal to its own, was not moved under its readers
    assert [name for name in os.listdir(tmp_path) if name.startswith(".lm")] == []
