"""Masked-LM and ELECTRA pre-training from the command line: the masked-token perplexity in
the summary and in `seqjax eval`, and no generation from an encoder."""

import json

import pytest

from seqjax.cli import main

from helpers import tiny


def run(workdir, *overrides):
    return main(["train", "--workdir", str(workdir), "--set", *tiny(*overrides)])


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("mlm")
    assert run(workdir, "model.kind=transformer_encoder", "objective.kind=masked_lm") == 0
    return workdir


@pytest.mark.slow
def test_mlm_run_reports_the_masked_token_perplexity_and_eval_reproduces_it(mlm_run, capsys):
    valid = json.loads((mlm_run / "summary.json").read_text())["valid"]
    assert "word_perplexity" not in valid and 0.1 < valid["masked_fraction"] < 0.2
    assert 1 < valid["token_perplexity"]
    assert main(["eval", "--workdir", str(mlm_run), "--split", "valid"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out[out.index('{\n  "valid"'):])["valid"]
    for name, value in valid.items():
        assert result[name] == pytest.approx(value, rel=1e-6), name


@pytest.mark.slow
def test_an_encoder_run_has_nothing_to_generate(mlm_run, capsys):
    assert main(["generate", "--workdir", str(mlm_run)]) == 2
    assert "no decode step" in capsys.readouterr().err


@pytest.mark.slow
def test_electra_run_logs_both_losses(tmp_path):
    assert run(tmp_path, "model.kind=electra", "objective.kind=electra") == 0
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert all(r["loss"] == pytest.approx(r["generator_loss"] + 50 * r["discriminator_loss"], rel=1e-5) for r in train)
    valid = json.loads((tmp_path / "summary.json").read_text())["valid"]
    assert 1 < valid["token_perplexity"] and "masked_fraction" in valid
