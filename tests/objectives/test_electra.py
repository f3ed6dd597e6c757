"""ELECTRA: the discriminator's labels, its loss against a numpy cross-entropy, the generator
trained by its masked-LM loss alone, a generator narrower than the discriminator, and the
discriminator's detection sums at evaluation against hand counts."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from objective_toys import initialized_on_random_tokens

from seqjax.config import HeadConfig, ModelConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import build_head
from seqjax.model_head import init_params, token_log_probs
from seqjax.models import build_model
from seqjax.models.encoders.electra import ElectraModelOptions
from seqjax.objectives import Electra
from seqjax.objectives.electra import replace_tokens, replaced_labels
from seqjax.objectives.masked_lm import EVAL_RATE, MaskedLMOptions, encoded, mask_tokens

V, B, T = 12, 3, 8


def test_labels_mark_the_tokens_that_differ_from_the_original():
    original = jnp.array([[5, 6, 7, 8], [9, 10, 11, 0]])
    corrupted = jnp.array([[5, 9, 7, 4], [9, 10, 6, 0]])  # position (0, 0) was sampled back to itself
    valid = jnp.array([[True] * 4, [True, True, True, False]])
    np.testing.assert_array_equal(replaced_labels(corrupted, original, valid), [[0, 1, 0, 1], [0, 0, 1, 0]])


# one generator block, the default (model.electra.generator_layers)
TINY = ModelConfig(kind="electra", d_model=16, layers=1, num_heads=2, d_ff=32, dropout=0.0, max_len=T)


def generator_of_width(cfg, width):
    return cfg.with_options(ElectraModelOptions(generator_width=width))


@pytest.fixture(scope="module", params=[1.0, 0.25], ids=["same-width", "quarter-width"])
def tiny_electra(request):
    cfg = generator_of_width(TINY, request.param)
    model = build_model(cfg, V)
    head = build_head(HeadConfig(kind="full", tied=True), V, np.ones(V))
    return initialized_on_random_tokens(model, head, V, jnp.ones((B, T)).at[2, 5:].set(0.0))


@pytest.mark.slow
def test_discriminator_loss_is_the_cross_entropy_of_replaced_against_original(tiny_electra):
    model, head, params, batch = tiny_electra
    key = jax.random.key(4)
    objective = Electra(rate=0.5, discriminator_weight=2.0)
    loss, metrics = jax.jit(lambda p: objective(model, head, p, batch, key, jnp.int32(0), ids=SPECIAL_IDS))(params)
    mask_key, sample_key, _ = jax.random.split(jax.random.split(key, 3)[0], 3)
    valid = batch["mask"] > 0
    masking = MaskedLMOptions(rate=0.5, mask_prob=1.0, random_prob=0.0)
    masked, selected = mask_tokens(batch["targets"], valid, mask_key, masking, ids=SPECIAL_IDS, vocab_size=V)
    hidden = encoded(model, params, masked, valid, key, train=False, method="generator")
    samples = jax.random.categorical(sample_key, token_log_probs(model, head, params, hidden))
    corrupted = np.where(selected, samples, batch["targets"])
    labels = (corrupted != np.asarray(batch["targets"])) & np.asarray(valid)
    logits = np.asarray(
        model.apply({"params": params["model"]}, jnp.asarray(corrupted), mask=valid, method="discriminate"), np.float64
    )
    probability = 1 / (1 + np.exp(-logits))
    cross_entropy = -(labels * np.log(probability) + (1 - labels) * np.log(1 - probability))
    want = cross_entropy[np.asarray(valid)].mean()
    assert float(metrics["discriminator_loss"]) == pytest.approx(want, rel=1e-5)
    assert float(metrics["replaced"]) == pytest.approx(labels[np.asarray(valid)].mean())
    assert float(loss) == pytest.approx(float(metrics["generator_loss"]) + 2.0 * want, rel=1e-5)


@pytest.mark.slow
def test_the_generator_learns_from_its_masked_lm_loss_only(tiny_electra):
    model, head, params, batch = tiny_electra
    key = jax.random.key(5)

    objective = Electra(discriminator_weight=50.0)

    @jax.jit
    def generator_gradients(p):
        def term(name):
            def value(p):
                loss, metrics = objective(model, head, p, batch, key, jnp.int32(0), ids=SPECIAL_IDS)
                return loss if name == "loss" else metrics[name]

            return jax.grad(value)(p)["model"]["generator_stack"]

        return term("loss"), term("generator_loss"), term("discriminator_loss")

    total, generator, discriminator = generator_gradients(params)
    for got, want in zip(jax.tree.leaves(total), jax.tree.leaves(generator)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert all(not np.any(np.asarray(leaf)) for leaf in jax.tree.leaves(discriminator))
    assert any(np.any(np.asarray(leaf)) for leaf in jax.tree.leaves(generator))


def test_a_quarter_width_generator_has_quarter_width_blocks_and_maps_to_the_shared_width():
    model = build_model(generator_of_width(dataclasses.replace(TINY, num_heads=4, d_ff=64), 0.25), V)
    batch = {"inputs": jnp.zeros((1, T), jnp.int32), "targets": jnp.zeros((1, T), jnp.int32), "mask": jnp.ones((1, T))}
    head = build_head(HeadConfig(kind="full", tied=True), V, np.ones(V))
    shapes = jax.tree.map(jnp.shape, jax.eval_shape(lambda: init_params(model, head, jax.random.key(0), batch)))
    generator, discriminator = shapes["model"]["generator_stack"], shapes["model"]["encoder"]
    assert generator["blocks_0"]["ff_in"]["kernel"] == (4, 16) and discriminator["blocks_0"]["ff_in"]["kernel"] == (
        16,
        64,
    )
    assert generator["blocks_0"]["self_attention"]["qkv"]["kernel"] == (4, 3, 1, 4)  # one head of 4
    assert shapes["model"]["generator_in"]["kernel"] == (16, 4) and shapes["model"]["generator_out"]["kernel"] == (
        4,
        16,
    )


@pytest.mark.parametrize("width", [0.0, 1.5, 0.3])
def test_a_generator_width_outside_the_rule_is_refused(width):
    with pytest.raises(ValueError, match="generator_width must be"):
        build_model(generator_of_width(TINY, width), V)


def test_a_generator_whose_heads_rope_cannot_turn_is_refused():
    with pytest.raises(ValueError, match="model.electra.generator_width=0.0625 .* even width for rope"):
        build_model(generator_of_width(dataclasses.replace(TINY, positions="rope"), 0.0625), V)  # one head of width 1


@pytest.mark.slow
def test_eval_detection_sums_count_the_replaced_tokens_the_discriminator_finds(tiny_electra):
    model, head, params, batch = tiny_electra
    key = jax.random.key(6)
    nll, masked, sums = Electra().eval_sums(model, head, params, batch, key, ids=SPECIAL_IDS)
    valid = batch["mask"] > 0
    eval_corruption = dict(ids=SPECIAL_IDS, rate=EVAL_RATE, temperature=1.0, train=False)
    _, _, corrupted = replace_tokens(
        model, head, params, batch["targets"], valid, jax.random.fold_in(key, 1), **eval_corruption
    )
    labels = np.asarray(corrupted != batch["targets"])[np.asarray(valid)]
    logits = np.asarray(model.apply({"params": params["model"]}, corrupted, mask=valid, method="discriminate"))
    found = (logits > 0)[np.asarray(valid)]
    assert float(sums["discriminator_count"]) == valid.sum()
    assert float(sums["discriminator_positives"]) == labels.sum()
    assert float(sums["discriminator_true_positives"]) == (labels & found).sum()
    assert float(sums["discriminator_correct"]) == (labels == found).sum()
    assert float(sums["discriminator_positive_histogram"].sum()) == labels.sum()
    report = Electra.eval_report(float(nll), float(masked), jax.device_get(sums))
    assert report["discriminator_base_rate"] == pytest.approx(labels.mean())
    assert report["masked_fraction"] == pytest.approx(float(masked) / valid.sum())
