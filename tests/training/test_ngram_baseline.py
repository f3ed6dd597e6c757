"""model.kind=ngram from the command line: the run directory, exact perplexity over the
tokens the neural evaluation counts, and the configs it refuses."""

import json
import math

import pytest
from tiny_runs import tiny, tiny_config

from seqjax.cli import main
from seqjax.data import EOS_ID, lm_eval_batches, load_data
from seqjax.models.classic.ngram import fit
from seqjax.training.loop import train

NGRAM = ["model.kind=ngram", "model.context=2"]


def quiet(_):
    pass


def test_cli_trains_the_ngram_and_writes_the_run_directory(tmp_path, capsys):
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny(*NGRAM)]) == 0
    out = capsys.readouterr().out
    assert "3-gram Kneser–Ney" in out and "valid: per-token perplexity" in out and "test: per-token perplexity" in out
    for name in ("config.json", "summary.json", "metrics.jsonl", "tokenizer"):
        assert (tmp_path / name).exists(), name
    assert not (tmp_path / "checkpoints").exists()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["model"] == "3-gram Kneser–Ney" and summary["parameters"] > 0
    for split in ("valid", "test"):
        result = summary[split]
        assert set(result) == {"nll", "token_perplexity", "tokens", "word_perplexity"}
        assert result["token_perplexity"] == pytest.approx(math.exp(result["nll"]))
        assert 1 < result["token_perplexity"] < 5  # the grammar is nearly deterministic per character
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["split"] for r in records] == ["valid", "test"]


def test_perplexity_is_kneser_ney_of_the_split_after_eos_over_the_neural_eval_tokens(tmp_path):
    cfg = tiny_config(*NGRAM)
    summary = train(cfg, str(tmp_path), echo=quiet)
    data = load_data(cfg.data)
    model = fit(data.splits["train"], 3, vocab_size=data.tokenizer.vocab.size)
    for split in ("valid", "test"):
        stream = data.splits[split]
        neural_tokens = sum(b["mask"].sum() for b in lm_eval_batches(stream, cfg.train.batch_size, cfg.data.seq_len))
        assert summary[split]["tokens"] == neural_tokens == len(stream)
        assert summary[split]["token_perplexity"] == pytest.approx(
            model.perplexity(stream, history=[EOS_ID]), rel=1e-12
        )


def test_chunks_shorter_than_the_context_take_their_history_from_the_chunks_before(tmp_path):
    cfg = tiny_config("model.kind=ngram", "model.context=4", "data.seq_len=2")
    summary = train(cfg, str(tmp_path), echo=quiet)
    data = load_data(cfg.data)
    model = fit(data.splits["train"], 5, vocab_size=data.tokenizer.vocab.size)
    expected = model.perplexity(data.splits["valid"], history=[EOS_ID])
    assert summary["valid"]["token_perplexity"] == pytest.approx(expected, rel=1e-12)


def test_eval_batches_scores_only_the_tokens_of_those_batches(tmp_path):
    cfg = tiny_config(*NGRAM, "train.eval_batches=1")
    summary = train(cfg, str(tmp_path), echo=quiet)
    data = load_data(cfg.data)
    first = next(lm_eval_batches(data.splits["valid"], cfg.train.batch_size, cfg.data.seq_len))
    model = fit(data.splits["train"], 3, vocab_size=data.tokenizer.vocab.size)
    expected = model.nll_sum(first["targets"].reshape(-1), history=[EOS_ID]) / first["mask"].sum()
    assert summary["valid"]["tokens"] == first["mask"].sum()
    assert summary["valid"]["nll"] == pytest.approx(expected)
    assert "word_perplexity" not in summary["valid"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["data.task=reverse"], "is sentence-pair data, which needs an encoder-decoder"),
        (["model.context=-1"], "model.context must be an int >= 0 (the n-gram order - 1)"),
        (["head.kind=sampled"], "head.kind='sampled' does not apply to model.kind=ngram"),
        (["objective.kind=reinforce"], "objective.kind='reinforce' does not apply to model.kind=ngram"),
        (["train.init_from=elsewhere"], "train.init_from='elsewhere' does not apply to model.kind=ngram"),
    ],
)
def test_configs_the_ngram_cannot_honour_are_refused(tmp_path, capsys, overrides, message):
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny(*NGRAM, *overrides)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "config.json").exists()


def test_a_workdir_holding_another_run_is_refused(tmp_path, capsys):
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny(*NGRAM)]) == 0
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny("model.kind=ngram", "model.context=3")]) == 2
    assert "holds another run: model.context" in capsys.readouterr().err


def test_the_same_ngram_command_again_recounts_the_same_numbers(tmp_path):
    first = train(tiny_config(*NGRAM), str(tmp_path), echo=quiet)
    again = train(tiny_config(*NGRAM), str(tmp_path), echo=quiet)
    assert again["valid"] == first["valid"] and again["test"] == first["test"]
