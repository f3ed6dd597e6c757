"""The VAE language model from the command line: train, eval (the bound and its KL),
generation from the prior with each decoder, and latent interpolation."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny_runs import tiny, tiny_config

from seqjax.cli import main
from seqjax.data.tokenizers.vocab import EOS_ID
from seqjax.model_head import init_params
from seqjax.objectives.vae import posterior
from seqjax.training.core.experiment import build_experiment
from seqjax.training.features.interpolation import posterior_means

VAE_RUN = (
    "data.seq_len=128",  # a row holds one whole sentence; the grammar's longest has about 100 characters
    "model.kind=rnn_vae",
    "objective.kind=vae",
    "model.rnn_vae.latent_size=4",
    "model.rnn_vae.feed_latent=true",
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
    gap = (valid["prior_reconstruction_nll"] - valid["reconstruction_nll"]) * valid["tokens"]
    assert valid["reconstruction_gap"] * rows == pytest.approx(gap, rel=1e-4, abs=1e-4)


@pytest.mark.slow
def test_evaluation_scores_each_sentence_in_a_row_of_its_own_and_no_padding(vae_run):
    valid = json.loads((vae_run / "summary.json").read_text())["valid"]
    stream = build_experiment(tiny_config(*VAE_RUN)).stream.splits["valid"]
    rows = -valid["nll"] * valid["tokens"] / valid["elbo"]
    assert valid["tokens"] == len(stream)  # every token of the split, no slot of padding
    assert round(rows) == np.sum(stream == EOS_ID)  # one row per sentence


@pytest.fixture(scope="module")
def initialized_vae():
    exp = build_experiment(tiny_config(*VAE_RUN))
    batch = {k: jnp.asarray(v) for k, v in exp.train_batches().batch(0).items()}
    # One compiled program: half the time of initializing the recurrent model op by op.
    params = jax.jit(lambda key: init_params(exp.model, exp.head, key, batch))(jax.random.key(0))
    return exp, params, batch


def test_interpolation_encodes_a_sentence_as_its_training_row_does(initialized_vae):
    exp, params, batch = initialized_vae
    targets, mask = np.asarray(batch["targets"][0]), np.asarray(batch["mask"][0])
    assert targets[int(mask.sum()) - 1] == EOS_ID and np.sum(targets == EOS_ID) == 1  # the row is one sentence
    sentence = exp.tokenizer.decode(targets[: int(mask.sum()) - 1].tolist())
    mean, _ = posterior(exp.model, params, batch)
    np.testing.assert_allclose(posterior_means(exp, params, [sentence])[0], mean[0], rtol=1e-6, atol=1e-6)


def test_a_sentence_to_interpolate_longer_than_a_row_is_refused(initialized_vae):
    exp, params, _ = initialized_vae
    with pytest.raises(ValueError, match="the sentences to interpolate has 1 line.* longer than data.seq_len=128"):
        posterior_means(exp, params, ["a" * 128])


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
