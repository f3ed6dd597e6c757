"""The VAE language model from the command line: train, eval (the bound and its KL),
generation from the prior with each decoder, and latent interpolation."""

import json

import numpy as np
import pytest
from helpers import tiny

from seqjax.cli import main

VAE_RUN = (
    "model.kind=rnn_vae",
    "objective.kind=vae",
    "model.latent_size=4",
    "model.feed_latent=true",
    "objective.vae.anneal_steps=2",
    "objective.vae.word_dropout=0.25",
    "objective.vae.free_bits=0.1",
)


@pytest.fixture(scope="module")
def vae_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("vae")
    assert main(["train", "--workdir", str(workdir), "--set", *tiny(*VAE_RUN)]) == 0
    return workdir


def printed_json(out, first_key):
    return json.loads(out[out.index("{\n  " + json.dumps(first_key)) :])


@pytest.mark.slow
def test_a_run_logs_the_kl_and_reports_the_bound(vae_run):
    records = [json.loads(line) for line in (vae_run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert [r["kl_weight"] for r in train] == pytest.approx([0.25, 1.0])  # means of β over steps 0-1 and 2-3
    assert all(r["kl"] >= 0 and r["negative_elbo"] >= r["reconstruction"] for r in train)
    valid = json.loads((vae_run / "summary.json").read_text())["valid"]
    assert valid["kl"] >= 0 and valid["reconstruction_nll"] <= valid["nll"]
    assert valid["token_perplexity"] == pytest.approx(np.exp(valid["nll"]), rel=1e-6)
    # −ELBO spread over tokens and over rows is one total: nll · tokens = −elbo · rows
    rows = -valid["nll"] * valid["tokens"] / valid["elbo"]
    assert rows == pytest.approx(round(rows), abs=1e-3)
    assert (valid["nll"] - valid["reconstruction_nll"]) * valid["tokens"] == pytest.approx(valid["kl"] * rows, rel=1e-4)


@pytest.mark.slow
def test_eval_reproduces_the_runs_bound(vae_run, capsys):
    assert main(["eval", "--workdir", str(vae_run), "--split", "valid"]) == 0
    out = capsys.readouterr().out
    assert "bounds from the ELBO" in out
    result = printed_json(out, "valid")["valid"]
    summary = json.loads((vae_run / "summary.json").read_text())["valid"]
    for name, value in summary.items():
        assert result[name] == pytest.approx(value, rel=1e-6), name


@pytest.mark.slow
@pytest.mark.parametrize("decoder", [[], ["--sample"], ["--beam", "3"]], ids=["greedy", "sample", "beam"])
def test_generate_decodes_from_the_prior(vae_run, capsys, decoder):
    argv = ["generate", "--workdir", str(vae_run), "--num", "3", "--max-len", "6", *decoder]
    assert main(argv) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if "sample:" in line]) == 3


@pytest.mark.slow
def test_interpolation_prints_a_sentence_per_point(vae_run, capsys):
    argv = ["generate", "--workdir", str(vae_run), "--interpolate", "ab", "ba", "--points", "3", "--max-len", "6"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["  0.00", "  0.50", "  1.00"]


def expect_user_error(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_vae_model_and_objective_are_refused_apart(tmp_path, capsys):
    for overrides in (
        ("model.kind=rnn_vae",),
        ("model.kind=rnn", "objective.kind=vae"),
        ("model.kind=bilm", "objective.kind=vae"),
        ("model.kind=rnn", "objective.kind=bidirectional_lm"),
    ):
        expect_user_error(
            capsys, ["train", "--workdir", str(tmp_path / "r"), "--set", *tiny(*overrides)], "go together"
        )


def test_interpolation_options_are_checked_before_loading(tmp_path, capsys):
    base = ["generate", "--workdir", str(tmp_path), "--interpolate", "a", "b"]
    expect_user_error(capsys, [*base, "--points", "1"], "--points must be >= 2")
    expect_user_error(capsys, [*base, "--prompt", "x"], "neither --prompt nor --input")
