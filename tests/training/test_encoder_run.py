"""Masked-LM and ELECTRA pre-training from the command line: the masked-token perplexity in
the summary and in `seqjax eval`, no generation from an encoder, and a pre-trained encoder
starting the encoder of an encoder–decoder run."""

import json

import jax
import numpy as np
import pytest
from helpers import tiny

from seqjax.cli import main


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
    result = json.loads(out[out.index('{\n  "valid"') :])["valid"]
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


@pytest.mark.slow
def test_a_seq2seq_run_starts_its_encoder_from_the_pretrained_encoder(mlm_run, tmp_path, capsys):
    from seqjax.cli import restored

    seq2seq = ["model.kind=transformer_seq2seq", "data.task=reverse", "data.buckets=24", "data.max_pair_len=20"]
    # A learning rate of 1e-9 moves no weight by more than ~1e-8 in two steps.
    changes = [
        f"train.init_encoder_from={mlm_run}",
        "optim.learning_rate=1e-9",
        "train.steps=2",
        "train.num_printed_samples=0",
    ]
    assert run(tmp_path, *seq2seq, *changes) == 0
    assert f"encoder initialized from {mlm_run}: 14 weights" in capsys.readouterr().out
    pre_exp, pre, _ = restored(str(mlm_run), [])
    exp, state, _ = restored(str(tmp_path), [])
    got, want = state.params["model"], pre.params["model"]["encoder"]
    for name in ("blocks_0", "final_norm"):
        renamed = {"blocks_0": "encoder_blocks_0", "final_norm": "encoder_norm"}[name]
        for a, b in zip(jax.tree.leaves(got[renamed]), jax.tree.leaves(want[name]), strict=True):
            np.testing.assert_allclose(a, b, atol=1e-7, err_msg=name)
    src_vocab, pre_vocab = exp.pairs.src_tokenizer.vocab, pre_exp.tokenizer.vocab
    shared = [t for t in src_vocab.tokens if t in pre_vocab]
    assert 0 < len(shared) < src_vocab.size
    rows = np.asarray(got["src_embed"]["embedding"])
    for token in shared:
        np.testing.assert_allclose(
            rows[src_vocab.id(token)], pre.params["model"]["embed"]["embedding"][pre_vocab.id(token)], atol=1e-7
        )


def test_init_encoder_from_refuses_a_run_that_is_not_an_encoder(mlm_run, tmp_path, capsys):
    assert run(tmp_path, "model.kind=transformer", f"train.init_encoder_from={mlm_run}") == 2
    assert "starts the encoder of a transformer_seq2seq run, got model.kind='transformer'" in capsys.readouterr().err
    assert not (tmp_path / "checkpoints").exists()
