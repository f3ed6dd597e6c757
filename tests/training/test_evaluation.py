"""Exact evaluation: the eval step's NLL sum and `evaluate`'s perplexities against numpy computations from the
head's log-probabilities."""

import jax
import numpy as np
import pytest
from helpers import split_nll
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import batch_sharding, make_mesh
from seqjax.training.core.state import init_state
from seqjax.training.core.steps import make_eval_step
from seqjax.training.features.evaluation import eval_batches, evaluate


@pytest.fixture(scope="module")
def initialized():
    """A tiny LM experiment, its initial parameters on the host, and its eval step over 8 devices."""
    exp = build_experiment(tiny_config())
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    first = next(eval_batches(exp.cfg, exp.data, "valid"))
    state = init_state(exp.model, exp.head, optimizer, 0, first, make_mesh("data:1", jax.devices()[:1]))
    mesh = make_mesh("data:8", jax.devices()[:8])
    return exp, jax.device_get(state.params), make_eval_step(exp.model, exp.head, mesh), mesh


def test_the_eval_step_sums_the_nll_of_the_unmasked_targets_under_the_heads_log_probs(initialized):
    exp, params, step, mesh = initialized
    *_, batch = eval_batches(exp.cfg, exp.data, "valid")  # the last batch: padded, mask 0 after the split's end
    mask = batch["mask"].reshape(-1)
    assert 0 < mask.sum() < mask.size

    nll_sum, tokens = step(params, jax.device_put(batch, batch_sharding(mesh)))

    assert not exp.head.tied
    hidden = exp.model.apply({"params": params["model"]}, batch["inputs"], train=False)
    log_probs = exp.head.apply({"params": params["head"]}, hidden.reshape(-1, hidden.shape[-1]), method="log_probs")
    log_probs = np.asarray(log_probs, np.float64)
    expected = -np.sum(log_probs[np.arange(mask.size), batch["targets"].reshape(-1)] * mask)
    assert float(tokens) == mask.sum()
    np.testing.assert_allclose(float(nll_sum), expected, rtol=1e-6)


def test_evaluate_weights_every_token_of_the_split_alike_across_batches_of_unequal_size(initialized):
    exp, params, step, mesh = initialized
    cfg = exp.cfg
    # A last batch with fewer tokens than the others: a mean of the batches' means differs.
    assert len(exp.data.splits["valid"]) % (cfg.train.batch_size * cfg.data.seq_len) != 0

    result = evaluate(cfg, exp.data, "valid", lambda batch: step(params, jax.device_put(batch, batch_sharding(mesh))))

    total, tokens = split_nll(exp, params, "valid")
    assert result["tokens"] == tokens
    np.testing.assert_allclose(result["nll"], total / tokens, rtol=1e-6)
    np.testing.assert_allclose(result["token_perplexity"], np.exp(total / tokens), rtol=1e-6)
    np.testing.assert_allclose(result["word_perplexity"], np.exp(total / exp.data.words["valid"]), rtol=1e-5)


@pytest.mark.parametrize("tokenizer", ["char", "word"])
def test_a_translation_splits_word_perplexity_spreads_its_summed_nll_over_the_reference_words(tmp_path, tokenizer):
    for split, (en, de) in {"train": ("a b\nc\n", "x y\nz\n"), "dev": ("a\nb c\n", "x y z\nz\n")}.items():
        (tmp_path / f"{split}.en").write_text(en)
        (tmp_path / f"{split}.de").write_text(de)
    cfg = tiny_config(
        "model.kind=transformer_seq2seq",
        "data.kind=parallel",
        f"data.tokenizer={tokenizer}",
        f"data.train={tmp_path / 'train'}",
        f"data.valid={tmp_path / 'dev'}",
    )
    exp = build_experiment(cfg)

    result = evaluate(cfg, exp.data, "valid", lambda batch: (0.5 * batch["mask"].sum(), batch["mask"].sum()))

    words = 3 + 1 + 2  # "x y z", "z" and one `</s>` per reference
    total = 0.5 * result["tokens"]
    np.testing.assert_allclose(result["word_perplexity"], np.exp(total / words), rtol=1e-6)
