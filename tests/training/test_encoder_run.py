"""Masked-LM and ELECTRA pre-training from the command line: the masked-token perplexity in
the summary and in `seqjax eval`, no generation from an encoder, and a pre-trained encoder
starting the encoder of an encoder–decoder run."""

import json

import jax
import numpy as np
import pytest
from tiny_runs import tiny, tiny_config

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
    assert 0 <= valid["discriminator_auc"] <= 1 and 0 < valid["discriminator_base_rate"] < 0.2
    assert valid["discriminator_base_rate_loss"] > 0 and "discriminator_recall" in valid


@pytest.mark.slow
def test_the_pretrained_encoder_replaces_the_encoder_and_the_shared_words_source_embeddings(mlm_run):
    from seqjax.model_head import init_params
    from seqjax.training.core.experiment import build_experiment
    from seqjax.training.core.layout import make_mesh
    from seqjax.training.features.pretrained_encoder import with_pretrained_encoder
    from seqjax.training.saved.run import Run

    seq2seq = ["model.kind=transformer_seq2seq", "data.task=reverse", "data.buckets=24", "data.max_pair_len=20"]
    exp = build_experiment(tiny_config(*seq2seq))
    fresh = jax.jit(lambda key: init_params(exp.model, exp.head, key, exp.train_batches().batch(0)))(jax.random.key(3))
    said = []
    mesh = make_mesh("data:1", jax.devices()[:1])
    got = with_pretrained_encoder(exp, fresh, str(mlm_run), mesh, echo=said.append)["model"]
    assert said == [f"encoder initialized from {mlm_run}: 14 weights, 10 of 20 source words' embeddings"]
    restored = Run.open(str(mlm_run)).restore()
    pre_exp, pre = restored.exp, restored.state
    want = pre.params["model"]
    for name, renamed in (("blocks_0", "encoder_blocks_0"), ("final_norm", "encoder_norm")):
        for a, b in zip(jax.tree.leaves(got[renamed]), jax.tree.leaves(want["encoder"][name]), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    for name in ("decoder_blocks_0", "embed"):  # the decoder and the target side start fresh
        for a, b in zip(jax.tree.leaves(got[name]), jax.tree.leaves(fresh["model"][name]), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    src_vocab, pre_vocab = exp.pairs.src_tokenizer.vocab, pre_exp.tokenizer.vocab
    rows, pre_rows = np.asarray(got["src_embed"]["embedding"]), np.asarray(want["embed"]["embedding"])
    for i, token in enumerate(src_vocab.tokens):
        expected = pre_rows[pre_vocab.id(token)] if token in pre_vocab else fresh["model"]["src_embed"]["embedding"][i]
        np.testing.assert_array_equal(rows[i], expected, err_msg=token)


def test_init_encoder_from_refuses_a_run_that_is_not_an_encoder(mlm_run, tmp_path, capsys):
    assert run(tmp_path, "model.kind=transformer", f"train.init_encoder_from={mlm_run}") == 2
    assert "starts the encoder of a transformer_seq2seq run, got model.kind='transformer'" in capsys.readouterr().err
    assert not (tmp_path / "checkpoints").exists()
