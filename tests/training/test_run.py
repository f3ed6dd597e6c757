"""`Run.open(workdir)`: a saved run read back, its config, tokenizers, data and latest parameters."""

import json

import pytest
from tiny_runs import tiny

from seqjax import config as config_lib
from seqjax.cli import main
from seqjax.training.saved.run import Run


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("run")
    assert main(["train", "--workdir", str(workdir), "--set", *tiny()]) == 0
    return workdir


def test_opening_a_folder_without_a_run_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match=f"^--workdir {tmp_path} holds no run \\(no config.json\\)$"):
        Run.open(str(tmp_path))


def test_a_run_is_opened_with_its_saved_config_under_the_overrides(trained_run):
    saved = config_lib.from_dict(json.loads((trained_run / "config.json").read_text()))
    run = Run.open(str(trained_run), ["train.num_printed_samples=3"])
    assert run.cfg == config_lib.override(saved, ["train.num_printed_samples=3"]) != saved


def test_restore_gives_the_latest_checkpoint_and_the_runs_own_tokenizer(trained_run):
    run = Run.open(str(trained_run))
    restored = run.restore([])
    assert int(restored.state.step) == run.cfg.train.steps
    assert restored.exp.tokenizer.vocab.tokens == run.tokenizers().vocab.tokens


def test_a_trained_run_is_not_counted_and_an_ngram_run_is(trained_run, tmp_path):
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny("model.kind=ngram", "model.context=2")]) == 0
    assert not Run.open(str(trained_run)).counted
    assert Run.open(str(tmp_path)).counted


def test_the_data_of_a_run_is_read_under_its_own_saved_tokenizer(trained_run):
    run = Run.open(str(trained_run))
    data = run.data(["valid"])
    assert data.tokenizer.vocab == run.tokenizers().vocab and len(data.splits["valid"]) > 0
