"""ELMo's bidirectional LM from the command line: both directions' perplexities in the run's
summary and in `seqjax eval`, generation through the forward direction."""

import json

import numpy as np
import pytest
from tiny_runs import tiny

from seqjax.cli import main


@pytest.fixture(scope="module")
def bilm_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bilm")
    assert (
        main(["train", "--workdir", str(workdir), "--set", *tiny("model.kind=bilm", "objective.kind=bidirectional_lm")])
        == 0
    )
    return workdir


@pytest.mark.slow
def test_a_run_reports_each_directions_perplexity(bilm_run, capsys):
    records = [json.loads(line) for line in (bilm_run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert all(r["loss"] == pytest.approx((r["forward_loss"] + r["backward_loss"]) / 2, rel=1e-5) for r in train)
    valid = json.loads((bilm_run / "summary.json").read_text())["valid"]
    assert valid["backward_token_perplexity"] == pytest.approx(np.exp(valid["backward_nll"]), rel=1e-6)
    assert 1 < valid["backward_token_perplexity"] and 1 < valid["token_perplexity"]
    assert main(["eval", "--workdir", str(bilm_run), "--split", "valid"]) == 0
    out = capsys.readouterr().out
    assert "backward LM per-token perplexity" in out
    result = json.loads(out[out.index('{\n  "valid"') :])["valid"]
    for name, value in valid.items():
        assert result[name] == pytest.approx(value, rel=1e-6), name


@pytest.mark.slow
def test_generate_continues_with_the_forward_direction(bilm_run, capsys):
    assert main(["generate", "--workdir", str(bilm_run), "--prompt", "the ", "--num", "2", "--max-len", "6"]) == 0
    samples = [line for line in capsys.readouterr().out.splitlines() if "sample:" in line]
    assert len(samples) == 2 and all(s.split("sample: ")[1].startswith("the ") for s in samples)
