"""The command line end to end on tiny runs: train, resume, eval, generate, and bad input."""

import json
import os

import pytest

from seqjax.cli import main

from helpers import tiny


def train(workdir, *overrides):
    return main(["train", "--workdir", str(workdir), "--set", *tiny(*overrides)])


def listing(directory):
    return sorted(
        (os.path.relpath(os.path.join(root, f), directory), os.path.getsize(os.path.join(root, f)))
        for root, _, files in os.walk(directory) for f in files if f != "metrics.jsonl" and "tensorboard" not in root
    )


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("run")
    assert train(workdir) == 0
    return workdir


def test_train_writes_the_run_directory(trained_run, capsys):
    for name in ("config.json", "summary.json", "metrics.jsonl", "tokenizer", "tensorboard", "checkpoints"):
        assert os.path.exists(trained_run / name), name
    summary = json.loads((trained_run / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["valid"]["token_perplexity"] > 1
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [2, 4]


def test_running_the_same_command_again_resumes_where_it_stopped(tmp_path, capsys):
    assert train(tmp_path) == 0
    assert main(["train", "--extend-schedule", "--workdir", str(tmp_path), "--set", *tiny("train.steps=6")]) == 0
    out = capsys.readouterr().out
    assert "resuming" in out and "at step 4" in out
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [2, 4, 6]


def test_eval_and_generate_use_the_saved_run(trained_run, capsys):
    assert main(["eval", "--workdir", str(trained_run), "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert '"token_perplexity"' in out and '"grammatical"' in out  # the grammar task's own report
    assert main(["generate", "--workdir", str(trained_run), "--prompt", "the ", "--num", "3", "--max-len", "8"]) == 0
    samples = [line for line in capsys.readouterr().out.splitlines() if "sample:" in line]
    assert len(samples) == 3 and all(s.split("sample: ")[1].startswith("the ") for s in samples)


def expect_user_error(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unknown_config_key_is_a_one_line_error(tmp_path, capsys):
    expect_user_error(capsys, ["train", "--workdir", str(tmp_path / "r"), "--set", "model.widht=3"], "valid keys")
    assert not (tmp_path / "r").exists()


def test_missing_corpus_file_is_named(tmp_path, capsys):
    missing = tmp_path / "nope.txt"
    expect_user_error(
        capsys,
        ["train", "--workdir", str(tmp_path / "r"), "--set", "data.kind=text", f"data.train={missing}",
         f"data.valid={missing}", f"data.test={missing}"],
        str(missing),
    )


def test_undecodable_corpus_names_file_and_line(tmp_path, capsys):
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"fine line\nbad \xff\xfe line\n")
    expect_user_error(
        capsys,
        ["train", "--workdir", str(tmp_path / "r"), "--set", "data.kind=text", f"data.train={corpus}",
         f"data.valid={corpus}", f"data.test={corpus}"],
        "line 2",
    )


def test_resume_with_a_different_model_is_refused_and_the_run_is_untouched(trained_run, capsys):
    before = listing(trained_run)
    expect_user_error(capsys, ["train", "--workdir", str(trained_run), "--set", *tiny("model.d_model=48")],
                      "model.d_model")
    assert listing(trained_run) == before


def test_resume_with_a_changed_vocabulary_is_refused(tmp_path, capsys):
    assert train(tmp_path) == 0
    vocab_files = sorted((tmp_path / "tokenizer").iterdir())
    vocab_files[-1].write_text(vocab_files[-1].read_text().replace("e", "E", 1))
    before = listing(tmp_path)
    expect_user_error(capsys, ["train", "--workdir", str(tmp_path), "--set", *tiny()], "vocabulary")
    assert listing(tmp_path) == before


def test_eval_of_a_directory_without_a_run_is_refused(tmp_path, capsys):
    expect_user_error(capsys, ["eval", "--workdir", str(tmp_path)], "no run")


def test_init_from_starts_a_new_run_from_trained_parameters(trained_run, tmp_path, capsys):
    assert train(tmp_path / "rl", f"train.init_from={trained_run}", "optim.learning_rate=1e-3") == 0
    assert "parameters initialized from" in capsys.readouterr().out


def test_init_from_a_run_with_another_model_is_refused(trained_run, tmp_path, capsys):
    expect_user_error(
        capsys, ["train", "--workdir", str(tmp_path / "x"), "--set", *tiny("model.d_model=48",
                 f"train.init_from={trained_run}")], "different model config"
    )


@pytest.mark.parametrize("flags", [["--beam", "3", "--length-penalty", "0.6"], ["--top-k", "5", "--temperature", "0.7"],
                                   ["--top-p", "0.9"]])
def test_generate_with_each_decoding_strategy(trained_run, capsys, flags):
    assert main(["generate", "--workdir", str(trained_run), "--prompt", "A ", "--num", "2", "--max-len", "10", *flags]) == 0
    samples = [line for line in capsys.readouterr().out.splitlines() if "sample:" in line]
    assert len(samples) == 2


def test_bad_decoding_flags_are_user_errors(trained_run, capsys):
    generate = ["generate", "--workdir", str(trained_run), "--max-len", "8"]
    expect_user_error(capsys, generate + ["--beam", "0"], "beam must be >= 1")
    expect_user_error(capsys, generate + ["--top-p", "1.5"], "top_p")
    expect_user_error(capsys, ["generate", "--workdir", str(trained_run), "--max-len", "100"], "max_len")


def test_a_language_model_on_seq2seq_data_is_refused(tmp_path, capsys):
    expect_user_error(capsys, ["train", "--workdir", str(tmp_path / "r"), "--set", "data.task=reverse", "model.kind=rnn"],
                      "needs an encoder-decoder")


def test_seq2seq_train_eval_and_generate(tmp_path, capsys):
    # One bucket: every bucket length is its own compiled program, and compiling dominates here.
    seq2seq = ["data.task=reverse", "model.kind=transformer_seq2seq", "data.buckets=24", "data.max_pair_len=20"]
    assert train(tmp_path, *seq2seq) == 0
    assert "copy-the-source" in capsys.readouterr().out
    assert main(["eval", "--workdir", str(tmp_path), "--split", "test", "--beam", "2", "--length-penalty", "0.6"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{"):])
    assert result["generation"]["decoding"] == "beam 2, length penalty 0.6"
    assert 0 <= result["generation"]["bleu"] <= 100 and result["test"]["token_perplexity"] > 1
    assert main(["generate", "--workdir", str(tmp_path), "--prompt", "abc", "--max-len", "8"]) == 0
    assert capsys.readouterr().out.startswith("abc -> ")


def test_a_non_finite_loss_stops_the_run_naming_the_step(tmp_path, capsys):
    assert train(tmp_path, "optim.learning_rate=1e30", "optim.clip_norm=0", "optim.warmup_steps=0") == 1
    err = capsys.readouterr().err
    assert "training stopped" in err and "at step" in err and "Traceback" not in err
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())
