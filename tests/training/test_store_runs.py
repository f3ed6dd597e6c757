"""Runs on a prepared corpus: the first run prepares its token store, a resume reuses it
without reading the sources, the checkpoint records the store's fingerprint, a resume after a
source file changed is refused naming the file, and a trained run evaluates and generates
without its training text."""

import json
import os
import random

import pytest
from tiny_runs import tiny, tiny_config

from seqjax.cli import main
from seqjax.data import SPECIAL_TOKENS
from seqjax.training.core.run_dir import RunDir
from seqjax.training.loop import train


def _corpus(tmp_path):
    rng = random.Random(0)
    words = ["to", "be", "or", "not", "that", "is", "the", "question"]
    for split, n in (("train", 300), ("valid", 30)):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(n)]
        (tmp_path / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "train.txt", tmp_path / "valid.txt"


@pytest.mark.slow
def test_a_stored_run_resumes_on_its_store_and_refuses_a_changed_source(tmp_path):
    train_file, valid_file = _corpus(tmp_path)
    keys = ("data.kind=text", f"data.train={train_file}", f"data.valid={valid_file}", "data.tokenizer=word")
    keys += ("model.kind=rnn", f"data.store={tmp_path / 'store'}")
    messages: list[str] = []
    train(tiny_config(*keys, "train.steps=2"), str(tmp_path / "run"), echo=messages.append, extend_schedule=True)
    assert any("preparing it" in m for m in messages)
    checkpointer = RunDir(str(tmp_path / "run")).checkpointer(3)
    meta = checkpointer.restore_meta(2)
    checkpointer.close()
    assert isinstance(meta["store"], str) and len(meta["store"]) == 64
    assert meta["loader"] == {"start": 0, "grain": {"next_index": 2}}  # the Grain iterator's state

    messages.clear()
    train(tiny_config(*keys, "train.steps=4"), str(tmp_path / "run"), echo=messages.append, extend_schedule=True)
    assert any("resuming" in m for m in messages) and not any("preparing" in m for m in messages)

    with open(valid_file, "a") as file:
        file.write("a line added under the run\n")
    with pytest.raises(ValueError, match=f"source file {valid_file} .*changed since this run's token store"):
        train(tiny_config(*keys, "train.steps=6"), str(tmp_path / "run"), echo=messages.append, extend_schedule=True)


def test_seqjax_prepare_prints_the_store_and_reuses_it(tmp_path, capsys):
    train_file, valid_file = _corpus(tmp_path)
    argv = ["prepare", "--set", "data.kind=text", f"data.train={train_file}", f"data.valid={valid_file}"]
    assert main([*argv, "data.tokenizer=word"]) == 0
    out, err = capsys.readouterr()
    assert "preparing it" in err and "train 300 lines" in out and "valid 30 lines" in out
    store = out.split("token store ")[-1].split(":")[0]
    assert os.path.isfile(os.path.join(store, "manifest.json"))
    assert main([*argv, "data.tokenizer=word"]) == 0
    assert "preparing" not in capsys.readouterr().err  # the second run reuses the store


@pytest.mark.parametrize("kind", ["text", "parallel"])
def test_seqjax_prepare_prints_the_vocabulary_sizes(tmp_path, capsys, kind):
    (tmp_path / "c.txt").write_text("to be or not\n")
    (tmp_path / "c.en").write_text("a b c\n")
    (tmp_path / "c.de").write_text("x y\n")
    corpus = f"data.train={tmp_path / 'c.txt'}" if kind == "text" else f"data.train={tmp_path / 'c'}"
    argv = ["prepare", "--set", f"data.kind={kind}", corpus, "data.tokenizer=word", f"data.store={tmp_path / 's'}"]
    assert main(argv) == 0
    specials = len(SPECIAL_TOKENS)
    want = f"vocabulary {specials + 4:,}" if kind == "text" else f"vocabulary src {specials + 3}, tgt {specials + 2}"
    assert f"; {want}; fingerprint" in capsys.readouterr().out


def test_seqjax_prepare_of_synthetic_data_is_refused(capsys):
    assert main(["prepare"]) == 2
    assert "data.kind must be text or parallel to prepare a token store, got 'synthetic'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def run_without_train_text(tmp_path_factory):
    """A trained word-level run whose train file is gone; its store and valid file are there."""
    root = tmp_path_factory.mktemp("run")
    train_file, valid_file = _corpus(root)
    keys = ("data.kind=text", f"data.train={train_file}", f"data.valid={valid_file}", "data.tokenizer=word")
    settings = tiny(*keys, "model.kind=rnn", f"data.store={root / 'store'}")
    assert main(["train", "--workdir", str(root / "run"), "--set", *settings]) == 0
    os.rename(train_file, root / "train.txt.away")
    return root


def valid_result(capsys, root):
    assert main(["eval", "--workdir", str(root / "run"), "--split", "valid"]) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index('{\n  "valid"') :])["valid"]


def assert_reproduces_the_summary(result, root):
    summary = json.loads((root / "run" / "summary.json").read_text())["valid"]
    assert set(result) == set(summary)
    for name, value in summary.items():
        assert result[name] == pytest.approx(value, rel=1e-6), name


def test_eval_reads_its_split_from_the_store_when_the_train_text_is_gone(run_without_train_text, capsys):
    assert_reproduces_the_summary(valid_result(capsys, run_without_train_text), run_without_train_text)


def test_eval_encodes_its_split_file_when_the_train_text_and_the_store_are_gone(run_without_train_text, capsys):
    root = run_without_train_text
    os.rename(root / "store", root / "store.away")
    try:
        assert_reproduces_the_summary(valid_result(capsys, root), root)
    finally:
        os.rename(root / "store.away", root / "store")


def test_generate_needs_only_the_run_directory(run_without_train_text, capsys):
    root = run_without_train_text
    os.rename(root / "store", root / "store.away")
    try:
        generate = ["generate", "--workdir", str(root / "run"), "--prompt", "to be", "--num", "2", "--max-len", "4"]
        assert main(generate) == 0
        samples = [line for line in capsys.readouterr().out.splitlines() if "sample: " in line]
        assert len(samples) == 2 and all(line.split("sample: ")[1].startswith("to be") for line in samples)
    finally:
        os.rename(root / "store.away", root / "store")


@pytest.mark.slow
def test_eval_reads_the_runs_store_when_its_relative_paths_now_resolve_where_no_text_is(tmp_path, capsys, monkeypatch):
    """Trained on train.txt and valid.txt under $SEQJAX_DATA, evaluated with $SEQJAX_DATA unset in
    another directory: the names point at no file, and the run's store (its fingerprint) stands in."""
    _corpus(tmp_path)
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path))
    keys = ("data.kind=text", "data.train=train.txt", "data.valid=valid.txt", "data.tokenizer=word")
    settings = tiny(*keys, "model.kind=rnn")
    assert main(["train", "--workdir", str(tmp_path / "run"), "--set", *settings]) == 0
    capsys.readouterr()
    monkeypatch.delenv("SEQJAX_DATA")
    monkeypatch.chdir(tmp_path / "run")
    assert_reproduces_the_summary(valid_result(capsys, tmp_path), tmp_path)
