"""Finding out what can be set: `seqjax config` prints the resolved config as TOML that reads
back into the same config, `seqjax train --help` lists every key, a run prints what differs."""

import json
import os
import tomllib

import pytest
from tiny_runs import tiny

from seqjax import config as config_lib
from seqjax.cli import main
from seqjax.config import Config
from seqjax.config import text as config_text

EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "experiments")
SETS = [
    [],
    [
        "model.kind=rnn",
        "model.cell=gru",
        "train.steps=7",
        "data.buckets=8,16",
        "head.kind=adaptive",
        "head.adaptive.cutoffs=10",
    ],
    [
        "objective.kind=scheduled_sampling",
        "objective.scheduled_sampling.k=2.5",
        "data.kind=text",
        'data.train=/data/"quoted" dir\\train.txt',
        "data.tokenizer=word",
    ],
    ["data.task=reverse", "model.kind=transformer_seq2seq", "optim.learning_rate=1e-05", "train.mesh=data:2,model:4"],
]


def printed_config(capsys, argv):
    assert main(["config", *argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("sets", SETS)
def test_printed_config_reads_back_into_the_same_config(capsys, sets):
    text = printed_config(capsys, ["--set", *sets] if sets else [])
    assert config_text.from_toml(text) == config_lib.override(Config(), sets)
    assert config_lib.from_dict(tomllib.loads(text)) == config_lib.override(Config(), sets)


def test_an_experiment_file_reads_back_too(capsys):
    path = os.path.join(EXPERIMENTS, "shakespeare_words.py")
    text = printed_config(capsys, ["--config", path, "--set", "train.steps=3"])
    from seqjax.config.files import load_config

    cfg, _ = load_config(path)
    assert config_text.from_toml(text) == config_lib.override(cfg, ["train.steps=3"])


def test_each_key_shows_its_type_its_default_when_changed_its_doc_and_whether_it_applies(capsys):
    lines = printed_config(capsys, ["--set", "model.kind=rnn", "model.d_model=64"]).splitlines()

    def line(table, key):
        start = lines.index(f"[{table}]")
        return next(x for x in lines[start + 1 :] if x.startswith(f"{key} = "))

    assert (
        line("model", "d_model").split("#", 1)[1].strip() == "int, default 128: width of embeddings and hidden states"
    )
    assert line("model", "layers").split("#", 1)[1].strip().startswith("int: stacked layers")
    assert "not used" not in line("model", "cell") and "default" not in line("model", "cell")
    attention = ", ".join(config_lib.ATTENTION)
    assert f"(not used: applies to model.kind in ({attention}), not 'rnn')" in line("model", "num_heads")
    assert "not used: applies to objective.kind=mixer, not 'teacher_forcing'" in line(
        "objective.mixer", "sequences_per_source"
    )
    keys = [x.split(" = ")[0] for x in lines if " = " in x and not x.startswith("#")]
    assert len(keys) == len(config_lib.valid_keys(Config()))


def test_bad_overrides_are_the_usual_one_line_errors(capsys):
    assert main(["config", "--set", "model.widht=3"]) == 2
    assert "unknown config key 'model.widht'" in capsys.readouterr().err


def test_train_help_lists_every_section_and_key_with_type_and_default(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "--extend-schedule" in out
    for section in ("data:", "model:", "head:", "objective:", "objective.scheduled_sampling:", "optim:", "train:"):
        assert f"\n{section} " in out
    assert (
        "d_model: int = 128" in out
        and 'kind: str = "transformer"' in out
        and "buckets: tuple[int, ...] = [16, 32, 64]" in out
    )
    listed = out.split("config keys", 1)[1]
    for key in config_lib.valid_keys(Config()):
        assert f" {key.rsplit('.', 1)[1]}: " in listed, key


def test_a_run_prints_only_the_keys_that_differ_from_the_defaults(tmp_path, capsys):
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny()]) == 0
    out = capsys.readouterr().out
    start = out.index("config, where it differs from the defaults")
    printed = [line.strip() for line in out[start:].splitlines()[1:] if line.startswith("  ") and " = " in line]
    assert printed == config_text.changed(config_lib.override(Config(), tiny()))
    assert "train.steps = 4" in printed and not any(p.startswith("model.kind") for p in printed)
    assert '"d_ff"' not in out  # the whole JSON config is not printed; config.json holds it
    saved = config_lib.from_dict(json.loads((tmp_path / "config.json").read_text()))
    assert saved == config_lib.override(Config(), tiny())
