"""The command line end to end on tiny runs: train, resume, eval, generate, and bad input."""

import json
import os
import shutil

import jax
import numpy as np
import pytest
from helpers import split_nll
from tiny_runs import SAMPLES, tiny

from seqjax import config as config_lib
from seqjax import decoding
from seqjax import optimizers as optim
from seqjax.cli import main
from seqjax.contracts import SPECIAL_IDS
from seqjax.model_head import init_decode_state, make_step_fn, prefill
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import make_mesh
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import restore_state
from seqjax.training.features import continuation as lm_continuation
from seqjax.training.features import task_reports
from seqjax.training.features.evaluation import generation_report

pytestmark = pytest.mark.slow  # long tests: scheduled first (tests/conftest.py)


def train(workdir, *overrides):
    return main(["train", "--workdir", str(workdir), "--set", *tiny(*overrides)])


def listing(directory):
    return sorted(
        (os.path.relpath(os.path.join(root, f), directory), os.path.getsize(os.path.join(root, f)))
        for root, _, files in os.walk(directory)
        for f in files
        if f != "metrics.jsonl" and "tensorboard" not in root
    )


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("run")
    assert train(workdir, SAMPLES) == 0
    return workdir


def test_train_writes_the_run_directory(trained_run, capsys):
    for name in ("config.json", "summary.json", "metrics.jsonl", "tokenizer", "tensorboard", "checkpoints"):
        assert os.path.exists(trained_run / name), name
    summary = json.loads((trained_run / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["valid"]["token_perplexity"] > 1
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [2, 4]


def test_running_the_same_command_again_resumes_where_it_stopped(trained_run, tmp_path, capsys):
    run = shutil.copytree(trained_run, tmp_path / "run")
    assert main(["train", "--extend-schedule", "--workdir", str(run), "--set", *tiny("train.steps=6")]) == 0
    out = capsys.readouterr().out
    assert "resuming" in out and "at step 4" in out
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [2, 4, 6]


def printed_json(out, first_key):
    """The JSON object `seqjax eval` prints (after any report lines), from its first key on."""
    return json.loads(out[out.index("{\n  " + json.dumps(first_key)) :])


def test_eval_of_the_valid_split_reproduces_the_runs_summary(trained_run, capsys):
    assert main(["eval", "--workdir", str(trained_run), "--split", "valid"]) == 0
    result = printed_json(capsys.readouterr().out, "valid")
    summary = json.loads((trained_run / "summary.json").read_text())["valid"]
    assert set(result["valid"]) == set(summary)
    for name, value in summary.items():
        assert result["valid"][name] == pytest.approx(value, rel=1e-6), name
    assert "grammatical" in result["grammar"]  # the task's own report
    exp, params = checkpoint_params(trained_run, 4)
    total, tokens = split_nll(exp, params, "valid")  # no eval batching, no `evaluate`
    assert result["valid"]["tokens"] == tokens
    assert result["valid"]["nll"] == pytest.approx(total / tokens, rel=1e-6)


def test_a_runs_printed_samples_are_the_first_its_grammar_report_judged_not_decoded_again(trained_run, monkeypatch):
    exp, params = checkpoint_params(trained_run, 4)
    expected = lm_continuation.sample_texts(exp, params, num=2)  # continuations 0 and 1, decoded alone
    decoded = []

    def counted(exp, params, *, num):
        decoded.append(num)
        return expected_texts(exp, params, num=num)

    expected_texts = lm_continuation.sample_texts
    monkeypatch.setattr(lm_continuation, "sample_texts", counted)
    monkeypatch.setattr(task_reports, "sample_texts", counted)
    lines = []
    report = generation_report(exp, params, echo=lines.append)
    assert decoded == [256] and report["samples"] == expected
    assert lines[1:] == [f"  sample: {text}" for text in expected] and "are grammatical" in lines[0]
    decoded.clear()  # too few texts sampled so: the printed ones are decoded
    assert lm_continuation.lm_samples(exp, params, echo=lines.append, sampled=expected[:1])["samples"] == expected
    assert decoded == [2]


def test_generate_continues_the_prompt(trained_run, capsys):
    assert main(["generate", "--workdir", str(trained_run), "--prompt", "the ", "--num", "3", "--max-len", "8"]) == 0
    samples = [line for line in capsys.readouterr().out.splitlines() if "sample:" in line]
    assert len(samples) == 3 and all(s.split("sample: ")[1].startswith("the ") for s in samples)


def expect_user_error(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unknown_config_key_is_a_one_line_error(tmp_path, capsys):
    argv = ["train", "--workdir", str(tmp_path / "r"), "--set", "model.d_modle=3"]
    expect_user_error(capsys, argv, "unknown config key 'model.d_modle'; did you mean model.d_model?")
    assert not (tmp_path / "r").exists()


def test_an_unknown_model_kind_is_one_error_in_train_and_in_config(tmp_path, capsys):
    errors = []
    for argv in (["train", "--workdir", str(tmp_path / "r")], ["config"]):
        assert main([*argv, "--set", "model.kind=lstm"]) == 2
        errors.append(capsys.readouterr().err)
    assert errors[0] == errors[1] and len(errors[0].splitlines()) == 1
    assert (
        "model.kind must be one of rnn, " in errors[0]
        and "did you mean model.kind=rnn with model.cell=lstm?" in errors[0]
    )
    assert not (tmp_path / "r").exists()


def train_on_text(workdir, corpus):
    """`seqjax train` arguments for a run in `workdir` whose three splits are the text file `corpus`."""
    splits = [f"data.{split}={corpus}" for split in ("train", "valid", "test")]
    return ["train", "--workdir", str(workdir), "--set", "data.kind=text", *splits]


def test_missing_corpus_file_is_named(tmp_path, capsys):
    missing = tmp_path / "nope.txt"
    expect_user_error(
        capsys,
        train_on_text(tmp_path / "r", missing),
        str(missing),
    )


def test_undecodable_corpus_names_file_and_line(tmp_path, capsys):
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"fine line\nbad \xff\xfe line\n")
    expect_user_error(
        capsys,
        train_on_text(tmp_path / "r", corpus),
        "line 2",
    )


def test_resume_with_a_different_model_is_refused_and_the_run_is_untouched(trained_run, capsys):
    before = listing(trained_run)
    expect_user_error(
        capsys, ["train", "--workdir", str(trained_run), "--set", *tiny("model.d_model=48")], "model.d_model"
    )
    assert listing(trained_run) == before


def test_resume_with_a_changed_vocabulary_is_refused(trained_run, tmp_path, capsys):
    run = shutil.copytree(trained_run, tmp_path / "run")
    vocab_files = sorted((run / "tokenizer").iterdir())
    vocab_files[-1].write_text(vocab_files[-1].read_text().replace("e", "E", 1))
    before = listing(run)
    expect_user_error(capsys, ["train", "--workdir", str(run), "--set", *tiny()], "vocabulary")
    assert listing(run) == before


def test_eval_of_a_directory_without_a_run_is_refused(tmp_path, capsys):
    expect_user_error(capsys, ["eval", "--workdir", str(tmp_path)], "no run")


def checkpoint_params(workdir, step):
    """The experiment of the run in `workdir` and the parameters of its checkpoint at `step`, on the host."""
    cfg = config_lib.from_dict(json.loads((workdir / "config.json").read_text()))
    exp = build_experiment(cfg, tokenizers=RunDir(str(workdir)).tokenizers())
    checkpointer = RunDir(str(workdir)).checkpointer(cfg.train.keep_checkpoints)
    try:
        state, _ = restore_state(
            exp,
            checkpointer,
            step,
            optim.make_optimizer(cfg.optim, cfg.train.steps),
            make_mesh("data:1", jax.devices()[:1]),
            exp.train_batches().batch(0),
        )
    finally:
        checkpointer.close()
    return exp, jax.device_get(state.params)


def test_init_from_starts_a_new_run_from_the_sources_latest_parameters(trained_run, tmp_path):
    """The new run takes one update at a learning rate of 1e-12, which moves no parameter
    by more than 1e-12: its checkpoint at step 1 holds the parameters it started from."""
    assert (
        train(
            tmp_path,
            f"train.init_from={trained_run}",
            "optim.learning_rate=1e-12",
            "train.steps=1",
        )
        == 0
    )
    _, source = checkpoint_params(trained_run, 4)
    _, started = checkpoint_params(tmp_path, 1)
    for (path, got), want in zip(jax.tree_util.tree_leaves_with_path(started), jax.tree.leaves(source)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9, err_msg=jax.tree_util.keystr(path))


def test_init_from_a_run_with_another_model_is_refused(trained_run, tmp_path, capsys):
    expect_user_error(
        capsys,
        [
            "train",
            "--workdir",
            str(tmp_path / "x"),
            "--set",
            *tiny("model.d_model=48", f"train.init_from={trained_run}"),
        ],
        "has another model: model.d_model: the source's 32, this run's 48\n",
    )


@pytest.mark.parametrize("flags", [["--top-k", "5", "--temperature", "0.7"], ["--top-p", "0.9"]])
def test_generate_samples_with_each_sampling_filter(trained_run, capsys, flags):
    assert (
        main(["generate", "--workdir", str(trained_run), "--prompt", "A ", "--num", "2", "--max-len", "10", *flags])
        == 0
    )
    samples = [line for line in capsys.readouterr().out.splitlines() if "sample:" in line]
    assert len(samples) == 2


def continuation(exp, params, prompt, max_len, search, **options):
    """`prompt` continued by `search` (a seqjax.decoding function) called directly on the
    model's step function: a language model's prompt follows an EOS, its last id fed first."""
    ids = [SPECIAL_IDS.eos, *exp.tokenizer.encode(prompt)]
    state = init_decode_state(exp.model, params, 1, len(ids) + max_len)
    state = prefill(exp.model, params, state, np.asarray([ids[:-1]], np.int32))
    tokens = search(
        make_step_fn(exp.model, exp.head, params),
        state,
        bos_id=ids[-1],
        eos_id=SPECIAL_IDS.eos,
        pad_id=SPECIAL_IDS.pad,
        max_len=max_len,
        **options,
    )[0]
    best = tokens[0, 0] if tokens.ndim == 3 else tokens[0]  # beam search: [B, K, T], best first
    return exp.tokenizer.continue_text(prompt, np.asarray(best).tolist())


def test_generate_with_beam_search_prints_the_best_beam(trained_run, capsys):
    exp, params = checkpoint_params(trained_run, 4)
    beam = continuation(exp, params, "A ", 10, decoding.beam_search, beam_size=3, length_penalty=0.6)
    assert beam != continuation(exp, params, "A ", 10, decoding.greedy)  # --beam ignored would show
    flags = ["--prompt", "A ", "--num", "1", "--max-len", "10", "--beam", "3", "--length-penalty", "0.6"]
    assert main(["generate", "--workdir", str(trained_run), *flags]) == 0
    samples = [line for line in capsys.readouterr().out.splitlines() if "sample:" in line]
    assert samples == [f"  sample: {beam}"]


def test_bad_decoding_flags_are_user_errors(trained_run, capsys):
    generate = ["generate", "--workdir", str(trained_run), "--max-len", "8"]
    expect_user_error(capsys, generate + ["--beam", "0"], "beam must be >= 1")
    expect_user_error(capsys, generate + ["--top-p", "1.5"], "top_p")
    expect_user_error(capsys, ["generate", "--workdir", str(trained_run), "--max-len", "100"], "max_len")


def test_a_language_model_on_seq2seq_data_is_refused(tmp_path, capsys):
    expect_user_error(
        capsys,
        ["train", "--workdir", str(tmp_path / "r"), "--set", "data.task=reverse", "model.kind=rnn"],
        "needs an encoder-decoder",
    )


def test_evaluated_pairs_longer_than_the_model_reads_are_refused_before_training(tmp_path, capsys):
    for split, lines in (("train", ["ab", "ba"] * 8), ("test", ["ab", "x" * 40])):
        for side in ("en", "de"):
            (tmp_path / f"{split}.{side}").write_text("\n".join(lines) + "\n")
    corpus = ["data.kind=parallel", f"data.train={tmp_path / 'train'}", f"data.test={tmp_path / 'test'}"]
    sizes = ["model.max_len=32", "data.buckets=8,16", "data.max_pair_len=15"]
    argv = [
        "train",
        "--workdir",
        str(tmp_path / "r"),
        "--set",
        *tiny(*corpus, "model.kind=transformer_seq2seq", *sizes),
    ]
    expect_user_error(
        capsys,
        argv,
        "data.test has 1 pair(s) longer than model.max_len=32 positions (source + </s>, <s> + target; "
        "the longest needs 41), which evaluation scores: raise model.max_len to 41 or leave them out of data.test",
    )
    assert not (tmp_path / "r").exists()  # refused before training, not after


def test_seq2seq_train_eval_and_generate(tmp_path, capsys):
    # One bucket: every bucket length is its own compiled program, and compiling dominates here.
    seq2seq = ["data.task=reverse", "model.kind=transformer_seq2seq", "data.buckets=24", "data.max_pair_len=20"]
    assert train(tmp_path, *seq2seq, SAMPLES) == 0
    assert "copy-the-source" in capsys.readouterr().out
    assert main(["eval", "--workdir", str(tmp_path), "--split", "test", "--beam", "2", "--length-penalty", "0.6"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{") :])
    assert result["generation"]["decoding"] == "beam 2, length penalty 0.6"
    assert 0 <= result["generation"]["bleu"] <= 100 and result["test"]["token_perplexity"] > 1
    assert main(["generate", "--workdir", str(tmp_path), "--prompt", "abc", "--max-len", "8"]) == 0
    assert capsys.readouterr().out.startswith("abc -> ")
    # A file of sources: one output line per input line, a blank line left blank.
    (tmp_path / "in.txt").write_text("abc\n\nhello world\n")
    out_file = tmp_path / "out.txt"
    assert (
        main(
            [
                "generate",
                "--workdir",
                str(tmp_path),
                "--input",
                str(tmp_path / "in.txt"),
                "--beam",
                "2",
                "--output",
                str(out_file),
            ]
        )
        == 0
    )
    lines = out_file.read_text().split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0] and lines[2]


def test_a_non_finite_loss_stops_the_run_naming_the_step(tmp_path, capsys):
    assert train(tmp_path, "optim.learning_rate=1e30", "optim.clip_norm=0", "optim.warmup_steps=0") == 1
    err = capsys.readouterr().err
    assert "training stopped" in err and "at step" in err and "Traceback" not in err
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())


@pytest.mark.parametrize("command", ["train", "eval", "generate"])
def test_repeated_set_flags_accumulate(command):
    from seqjax.cli import parser

    args = parser().parse_args([command, "--workdir", "w", "--set", "a=1", "b=2", "--set", "c=3"])
    assert args.set == ["a=1", "b=2", "c=3"]
