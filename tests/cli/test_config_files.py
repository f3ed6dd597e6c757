"""`--config FILE`: an experiment file's errors are one line naming file, line and error; the TOML
that `seqjax config` prints is read back by every command that takes --config."""

import pytest

from seqjax.cli import main
from seqjax.config import dumps
from seqjax.config.text import from_toml


def one_line_error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_an_experiment_file_with_a_syntax_error_is_one_line_naming_file_line_and_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text("from seqjax.config import Config\n\ndef get_config(:\n    return Config()\n")
    err = one_line_error(capsys, ["train", "--config", "broken.py"])
    assert err == "seqjax: error: --config broken.py, line 3: SyntaxError: invalid syntax: def get_config(:\n"


def test_an_exception_in_get_config_names_the_line_of_the_file_it_came_from(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call = "    return config.override(config.Config(), ['x=1'])"
    lines = ["from seqjax import config", "", "def get_config():", call]
    (tmp_path / "raises.py").write_text("\n".join(lines) + "\n")
    err = one_line_error(capsys, ["config", "--config", "raises.py"])
    assert err.startswith("seqjax: error: --config raises.py, line 4: ValueError: unknown config key 'x'")


def test_an_import_error_at_the_top_of_the_file_names_its_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "imports.py").write_text("import os\nimport no_such_module_here\n")
    err = one_line_error(capsys, ["config", "--config", "imports.py"])
    assert "--config imports.py, line 2: ModuleNotFoundError: No module named 'no_such_module_here'" in err


def test_the_toml_seqjax_config_prints_reads_back_through_the_command_line(tmp_path, capsys):
    sets = ["model.kind=rnn", "head.kind=adaptive", "head.adaptive.cutoffs=[20, 80]", "data.buckets=8,16"]
    assert main(["config", "--set", *sets]) == 0
    printed = capsys.readouterr().out
    (tmp_path / "run.toml").write_text(printed)
    assert main(["config", "--config", str(tmp_path / "run.toml")]) == 0
    assert capsys.readouterr().out == printed


@pytest.mark.parametrize(
    "command", [["train"], ["config"], ["prepare"], ["compile", "--target", "h100:8", "--vocab-size", "64"]]
)
def test_every_command_taking_config_reads_a_toml_file(tmp_path, capsys, command):
    """The TOML's model.kind=rnn is what refuses a Transformer's key: each command read the file
    (a command that could not would refuse the file itself)."""
    (tmp_path / "rnn.toml").write_text('[model]\nkind = "rnn"\n')
    argv = [*command, "--config", str(tmp_path / "rnn.toml"), "--set", "model.num_heads=2"]
    err = one_line_error(capsys, argv)
    assert "model.num_heads applies to model.kind in (" in err and "not 'rnn': it would be ignored" in err


def test_a_malformed_toml_config_is_one_line_naming_the_file(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text("[model]\nd_model = \n")
    err = one_line_error(capsys, ["config", "--config", str(tmp_path / "bad.toml")])
    assert f"--config {tmp_path / 'bad.toml'}: config is not valid TOML: " in err and "line 2" in err


def test_a_config_file_of_no_known_form_is_refused_naming_the_forms(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text("model: {}\n")
    err = one_line_error(capsys, ["config", "--config", str(tmp_path / "run.yaml")])
    assert "is none of an experiment file defining get_config() (.py), a TOML config" in err


def test_a_directory_given_as_config_is_refused_naming_the_forms(tmp_path, capsys):
    err = one_line_error(capsys, ["config", "--config", str(tmp_path)])
    assert "--config must be a file (an experiment file defining get_config() (.py), " in err
    assert f"got {str(tmp_path)!r}, which is a directory" in err


def test_a_run_config_json_that_is_not_json_is_one_line_naming_the_file(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{model: 1}\n")
    err = one_line_error(capsys, ["config", "--config", str(tmp_path / "config.json")])
    assert f"--config {tmp_path / 'config.json'}: {tmp_path / 'config.json'} is not a run's config.json: " in err


def test_a_run_config_json_reads_back_the_config_the_run_saved(tmp_path, capsys):
    assert main(["config", "--set", "model.kind=rnn", "train.steps=7"]) == 0
    printed = capsys.readouterr().out
    (tmp_path / "saved.json").write_text(dumps(from_toml(printed)))
    assert main(["config", "--config", str(tmp_path / "saved.json")]) == 0
    assert capsys.readouterr().out == printed
