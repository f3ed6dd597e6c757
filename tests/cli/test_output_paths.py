"""Every path a command writes is checked before it starts working: a directory given for a file,
a file in a directory that does not exist, a directory under a file are each one line naming
the option. The runs named here do not exist: a command that started working first would fail
on them with another message."""

import pytest

from seqjax.cli import main
from seqjax.config import Config, dumps, override
from seqjax.output_paths import check_output_directory, check_output_file


def test_an_output_file_is_refused_when_a_directory_or_in_a_directory_that_does_not_exist(tmp_path):
    with pytest.raises(ValueError, match=rf"^--output must name a file, got '{tmp_path}', which is a directory$"):
        check_output_file(str(tmp_path), "--output")
    with pytest.raises(ValueError, match=rf"cannot be written: the directory {tmp_path / 'no'} does not exist$"):
        check_output_file(str(tmp_path / "no" / "out.txt"), "--output")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=rf"cannot be written: the directory {tmp_path / 'file'} is a file$"):
        check_output_file(str(tmp_path / "file" / "out.txt"), "--output")
    check_output_file(str(tmp_path / "new.txt"), "--output")
    check_output_file(str(tmp_path / "file"), "--output")  # an existing file is written over


def test_an_output_directory_is_refused_when_it_or_a_folder_above_it_is_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"^--workdir must name a directory, got '.*file', which is a file$"):
        check_output_directory(str(tmp_path / "file"), "--workdir")
    with pytest.raises(ValueError, match=rf"cannot be made a directory: {tmp_path / 'file'} is a file$"):
        check_output_directory(str(tmp_path / "file" / "a" / "b"), "--workdir")
    check_output_directory(str(tmp_path / "new" / "run"), "--workdir")  # made with its parents


def test_train_refuses_a_workdir_under_a_file_before_reading_data(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    argv = ["train", "--workdir", str(tmp_path / "file" / "run"), "--set", "data.kind=text", "data.train=nowhere.txt"]
    assert main(argv) == 2
    assert "--workdir" in capsys.readouterr().err


def refusals(tmp_path):
    """{case: (argv, message)} of each command given an output path it cannot write."""
    (tmp_path / "in.txt").write_text("a line\n")
    (tmp_path / "file").write_text("")
    run, folder, missing = str(tmp_path / "no-run"), str(tmp_path), str(tmp_path / "missing" / "out")
    lines = ["generate", "--workdir", run, "--input", str(tmp_path / "in.txt"), "--output"]
    return {
        "generate_into_a_directory": ([*lines, folder], "which is a directory"),
        "generate_into_a_missing_directory": ([*lines, missing], "does not exist"),
        "generate_output_without_input": (
            ["generate", "--workdir", run, "--prompt", "a", "--output", str(tmp_path / "o.txt")],
            "it needs --input",
        ),
        "compile_json_into_a_directory": (
            ["compile", "--target", "h100:8", "--vocab-size", "64", "--json", folder],
            "which is a directory",
        ),
        "plot_into_a_missing_directory": (["plot", "--workdir", run, "--output", missing], "does not exist"),
        "export_into_a_file": (["export-hf", "--workdir", run, "--output", str(tmp_path / "file")], "which is a file"),
        "import_under_a_file": (["import-hf", run, "--workdir", str(tmp_path / "file" / "run")], "is a file"),
        "backtranslate_training_under_a_file": (
            ["backtranslate", "--workdir", run, "--monolingual", str(tmp_path / "in.txt"), "--output", missing]
            + ["--train-workdir", str(tmp_path / "file" / "fwd")],
            "--train-workdir",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "generate_into_a_directory",
        "generate_into_a_missing_directory",
        "generate_output_without_input",
        "compile_json_into_a_directory",
        "plot_into_a_missing_directory",
        "export_into_a_file",
        "import_under_a_file",
        "backtranslate_training_under_a_file",
    ],
)
def test_each_command_refuses_an_output_it_cannot_write_before_working(tmp_path, capsys, case):
    argv, message = refusals(tmp_path)[case]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err and "no run" not in err


def test_backtranslate_refuses_an_output_prefix_in_a_missing_directory_before_translating(tmp_path, capsys):
    run = tmp_path / "de-en"
    run.mkdir()
    corpus = ["data.kind=parallel", f"data.train={tmp_path / 'train'}", "data.src=de", "data.tgt=en"]
    (run / "config.json").write_text(dumps(override(Config(), [*corpus, "model.kind=rnn_seq2seq"])))  # no checkpoint
    (tmp_path / "mono.de").write_text("ab\n")
    argv = ["backtranslate", "--workdir", str(run), "--monolingual", str(tmp_path / "mono.de")]
    assert main([*argv, "--output", str(tmp_path / "missing" / "bt")]) == 2
    err = capsys.readouterr().err
    assert f"--output '{tmp_path / 'missing' / 'bt.en'}' cannot be written: the directory" in err
