"""Flax heads built by build_head, under the head contract: loss, exact log-probs, tying, errors."""

import dataclasses
import functools

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import Config, HeadConfig, override
from seqjax.heads import AdaptiveOptions, AdaptiveSoftmax, ClassOptions, FullSoftmax, build_head
from seqjax.training.core.experiment import output_head

VOCAB, FEATURES, ROWS = 40, 8, 12
# Specials pad/bos/eos/unk first (arbitrary counts), then frequency-sorted words.
COUNTS = np.concatenate([[0, 0, 30, 0], np.arange(VOCAB - 4, 0, -1) * 3])
KINDS = ["full", "sampled", "nce", "negative", "class", "tree", "adaptive"]
# One tail cluster keeps compilation short; tests/heads/test_adaptive.py covers several.
BASE = HeadConfig(num_samples=6, groups=(ClassOptions(num_classes=5), AdaptiveOptions(cutoffs=(10,), div_value=2.0)))


def configured(change):
    """BASE with `change`: flat options, and a kind's options as a dict under the kind's name."""
    groups = {name: value for name, value in change.items() if isinstance(value, dict)}
    head = dataclasses.replace(BASE, **{name: value for name, value in change.items() if name not in groups})
    return head.with_options(*(dataclasses.replace(head.group(kind), **v) for kind, v in groups.items()))


def inputs(seed=0):
    keys = jax.random.split(jax.random.key(seed), 4)
    hidden = jax.random.normal(keys[0], (ROWS, FEATURES))
    targets = jax.random.randint(keys[1], (ROWS,), 0, VOCAB)
    mask = jnp.ones(ROWS).at[:3].set(0.0)
    embedding = jax.random.normal(keys[3], (VOCAB, FEATURES))
    return hidden, targets, keys[2], mask, embedding


@functools.cache  # tests share compiled heads: compilation dominates their time
def init_and_apply(cfg, tied=False, pass_embedding=True):
    head = build_head(cfg, VOCAB, COUNTS)
    hidden, targets, key, mask, embedding = inputs()
    embedding = embedding if tied and pass_embedding else None
    init = jax.jit(lambda k, *a: nn.meta.unbox(head.init({"params": k}, *a, method="loss")))
    variables = init(jax.random.key(1), hidden, targets, key, mask, embedding)
    loss, aux = jax.jit(lambda v, *a: head.apply(v, *a, method="loss"))(
        variables, hidden, targets, key, mask, embedding
    )
    log_probs = jax.jit(lambda v, *a: head.apply(v, *a, method="log_probs"))(variables, hidden, embedding)
    return head, variables, loss, aux, log_probs


@pytest.mark.parametrize("kind", KINDS)
def test_every_head_gives_normalized_exact_log_probs_and_a_finite_masked_loss(kind):
    _, _, loss, aux, log_probs = init_and_apply(dataclasses.replace(BASE, kind=kind))
    assert log_probs.shape == (ROWS, VOCAB) and log_probs.dtype == jnp.float32
    np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, rtol=1e-5)
    assert loss.shape == () and np.isfinite(loss)
    assert float(aux["tokens"]) == ROWS - 3


@pytest.mark.parametrize("kind", KINDS)
def test_a_masked_row_changes_neither_the_loss_nor_any_gradient(kind):
    head, variables, _, _, _ = init_and_apply(dataclasses.replace(BASE, kind=kind))
    hidden, targets, key, mask, _ = inputs()
    masked = np.asarray(mask) == 0
    # Other hidden states and other targets in the masked rows only; the key (the samples) is kept.
    other_hidden = jnp.where(masked[:, None], 5.0 * jax.random.normal(jax.random.key(11), hidden.shape), hidden)
    other_targets = jnp.where(masked, (targets + 1 + jnp.arange(ROWS)) % VOCAB, targets)
    assert np.all(np.asarray(other_targets)[masked] != np.asarray(targets)[masked])

    def loss(params, hidden, targets):
        return head.apply({"params": params}, hidden, targets, key, mask, method="loss")[0]

    both = jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=(0, 1)), in_axes=(None, 0, 0)))
    values, (param_grads, hidden_grads) = both(
        variables["params"], jnp.stack([hidden, other_hidden]), jnp.stack([targets, other_targets])
    )
    np.testing.assert_allclose(values[1], values[0], rtol=1e-6)
    chex.assert_trees_all_close(
        jax.tree.map(lambda g: g[1], param_grads), jax.tree.map(lambda g: g[0], param_grads), rtol=1e-5, atol=1e-7
    )
    assert any(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(param_grads))
    np.testing.assert_array_equal(np.asarray(hidden_grads)[:, masked], 0.0)
    np.testing.assert_allclose(hidden_grads[1], hidden_grads[0], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["full", "class", "tree", "adaptive"])
def test_exact_head_loss_is_masked_mean_negative_log_prob_of_targets(kind):
    _, _, loss, _, log_probs = init_and_apply(dataclasses.replace(BASE, kind=kind))
    _, targets, _, mask, _ = inputs()
    expected = -(mask * log_probs[jnp.arange(ROWS), targets]).sum() / mask.sum()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_chunked_full_softmax_head_equals_unchunked_head():
    plain = init_and_apply(dataclasses.replace(BASE, kind="full"))
    chunked = init_and_apply(configured({"kind": "full", "full": {"chunk_size": 7}}))
    np.testing.assert_allclose(chunked[2], plain[2], rtol=1e-6)


@pytest.mark.parametrize("kind", ["full", "sampled", "nce", "negative", "class", "adaptive"])
def test_tied_head_scores_words_with_the_given_embedding_and_owns_no_word_table(kind):
    embedding = inputs()[4]
    head, variables, _, _, log_probs = init_and_apply(dataclasses.replace(BASE, kind=kind, tied=True), tied=True)
    shapes = [leaf.shape for leaf in jax.tree.leaves(variables)]
    assert (VOCAB, FEATURES) not in shapes and (BASE.group("adaptive").cutoffs[0], FEATURES) not in shapes
    if kind in ("full", "sampled", "nce", "negative"):
        hidden = inputs()[0]
        scores = hidden @ embedding.T + variables["params"]["biases"]
        if kind == "negative":  # the distribution negative sampling fits: q · exp(s)
            scores = scores + head.sampler.log_probs
        np.testing.assert_allclose(log_probs, jax.nn.log_softmax(scores), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("log_normalizer", [0.0, 2.5])
def test_nce_head_starts_as_a_normalized_model(log_normalizer):
    cfg = configured({"kind": "nce", "nce": {"log_normalizer": log_normalizer}})
    biases = init_and_apply(cfg)[1]["params"]["biases"]
    # exp(b − log Z) is the model's probability of a word for a zero hidden state: it sums to 1.
    np.testing.assert_allclose(jax.nn.logsumexp(biases - log_normalizer), 0.0, atol=1e-5)


def test_negative_sampling_log_probs_recover_p_at_the_objectives_optimum():
    head = build_head(dataclasses.replace(BASE, kind="negative"), VOCAB, COUNTS)
    p = jax.nn.softmax(jax.random.normal(jax.random.key(3), (VOCAB,)))
    log_q = head.sampler.log_probs
    # NEG's optimum: s = log p − log(K q) (Mikolov et al. 2013; Levy & Goldberg 2014).
    params = {"weights": jnp.zeros((VOCAB, FEATURES)), "biases": jnp.log(p) - jnp.log(BASE.num_samples) - log_q}
    log_probs = head.apply({"params": params}, jnp.ones((2, FEATURES)), method="log_probs")
    np.testing.assert_allclose(log_probs, jnp.broadcast_to(jnp.log(p), (2, VOCAB)), rtol=1e-4, atol=1e-5)


def test_tied_head_without_embedding_raises_at_init():
    with pytest.raises(ValueError, match="is tied: pass the input embedding"):
        init_and_apply(dataclasses.replace(BASE, kind="full", tied=True), tied=True, pass_embedding=False)


def test_sampling_heads_use_the_key_and_have_gradients_for_every_parameter():
    head = build_head(configured({"kind": "nce", "nce": {"learn_normalizer": True}}), VOCAB, COUNTS)
    hidden, targets, key, mask, _ = inputs()
    init = jax.jit(lambda k: head.init({"params": k}, hidden, targets, k, mask, None, method="loss"))
    variables = nn.meta.unbox(init(key))
    loss = jax.jit(lambda v, k: head.apply(v, hidden, targets, k, mask, method="loss")[0])
    assert float(loss(variables, jax.random.key(5))) != float(loss(variables, jax.random.key(6)))
    grads = jax.jit(jax.grad(loss))(variables, key)["params"]
    assert set(grads) == {"weights", "biases", "log_normalizer"}
    assert all(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(grads))


@pytest.mark.parametrize("kind", ["sampled", "nce", "negative"])
def test_sampling_head_loss_without_a_key_raises_naming_the_head(kind):
    head = build_head(dataclasses.replace(BASE, kind=kind), VOCAB, COUNTS)
    hidden, targets, key, mask, _ = inputs()
    with pytest.raises(
        ValueError, match=f"{type(head).__name__} draws its samples from key: pass a PRNG key, got None"
    ):
        head.init({"params": key}, hidden, targets, None, mask, None, method="loss")


@pytest.mark.parametrize("kind", ["full", "sampled"])
def test_biases_that_are_not_learned_get_no_gradient_while_the_word_vectors_do(kind):
    head = build_head(dataclasses.replace(BASE, kind=kind, learn_bias=False), VOCAB, COUNTS)
    hidden, targets, key, mask, _ = inputs()
    # Compiled, not run op by op: a few programs instead of many.
    init = jax.jit(lambda k: head.init({"params": k}, hidden, targets, k, mask, None, method="loss"))
    grad = jax.jit(jax.grad(lambda v: head.apply(v, hidden, targets, key, mask, method="loss")[0]))
    grads = grad(nn.meta.unbox(init(key)))["params"]
    assert float(jnp.abs(grads["biases"]).max()) == 0.0 and float(jnp.abs(grads["weights"]).max()) > 0.0


def test_head_config_is_selectable_from_cli_overrides():
    config = override(Config(), ["head.kind=adaptive", "head.adaptive.cutoffs=10,25", "head.adaptive.div_value=2"])
    head = build_head(config.head, VOCAB, COUNTS)
    assert isinstance(head, AdaptiveSoftmax) and head.cutoffs == (10, 25) and head.div_value == 2.0
    config = override(Config(), ["head.kind=full", "head.full.chunk_size=16", "head.tied=true"])
    head = build_head(config.head, VOCAB, COUNTS)
    assert isinstance(head, FullSoftmax) and head.chunk_size == 16 and head.tied


@pytest.mark.parametrize("setting, passed", [("auto", ""), ("bfloat16", "bfloat16"), ("recompute", "recompute")])
def test_full_head_takes_what_its_blocks_keep_from_the_config(setting, passed):
    config = override(Config(), ["head.kind=full", f"head.full.block_residuals={setting}"])
    assert build_head(config.head, VOCAB, COUNTS).block_residuals == passed


def keeps_bfloat16(head):
    """Whether the head's blocked loss keeps bfloat16 exponentials for its backward pass: they
    travel as uint16 bits (`full._keep`) among the residuals; float32 ones are float32 arrays."""
    hidden, targets, key, mask, _ = inputs()
    variables = head.init({"params": key}, hidden, targets, key, mask, None, method="loss")
    _, vjp = jax.vjp(lambda v: head.apply(v, hidden, targets, key, mask, method="loss")[0], variables)
    return any(leaf.dtype == jnp.uint16 for leaf in jax.tree.leaves(vjp) if hasattr(leaf, "dtype"))


@pytest.mark.parametrize(
    "precision, setting, bfloat16",
    [
        ("float32", "auto", False),
        ("bfloat16", "auto", True),  # a bfloat16 run keeps its speed and memory
        ("float32", "bfloat16", True),  # asked for
        ("bfloat16", "float32", False),
    ],
)
def test_full_head_under_auto_keeps_exponentials_at_the_runs_precision(precision, setting, bfloat16):
    """Blocks of 8 words over V = 40: the backward pass reads float32 exponentials in a float32
    run, bfloat16 ones in a bfloat16 run, and what an explicit setting says in either."""
    config = override(Config(), ["head.kind=full", "head.full.chunk_size=8", f"head.full.block_residuals={setting}"])
    assert keeps_bfloat16(build_head(config.head, VOCAB, COUNTS, precision)) == bfloat16


def test_a_runs_full_head_reads_train_precision():
    config = override(Config(), ["head.kind=full", "train.precision=bfloat16"])
    assert output_head(config, VOCAB, COUNTS, None).precision == "bfloat16"
    assert output_head(override(Config(), ["head.kind=full"]), VOCAB, COUNTS, None).precision == "float32"


def test_build_head_rejects_an_unknown_precision_on_the_host():
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16, got 'float16'"):
        build_head(dataclasses.replace(BASE, kind="full"), VOCAB, COUNTS, "float16")


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(kind="softmax"), "head.kind must be one of"),
        (dict(kind="tree", tied=True), "head.tied must be false for head.kind=tree"),
        (dict(kind="sampled", num_samples=VOCAB), r"head.num_samples must be in \(0, vocab_size=40\)"),
        (dict(kind="nce", num_samples=0), r"head.num_samples must be in \(0, vocab_size=40\)"),
        (dict(kind="sampled", proposal="zipf"), "head.proposal must be one of"),
        (dict(kind="negative", proposal="unigram", power=-1.0), "head.power must be a finite number in \\[0.0, inf\\)"),
        ({"kind": "tree", "tree": {"tree": "random"}}, "tree must be one of"),
        ({"kind": "class", "class": {"num_classes": VOCAB + 1}}, "head.class.num_classes must be in"),
        ({"kind": "adaptive", "adaptive": {"cutoffs": (25, 10)}}, "head.adaptive.cutoffs must be increasing ints in"),
        (
            {"kind": "adaptive", "adaptive": {"cutoffs": (10, 40)}},
            r"head.adaptive.cutoffs must be increasing ints in \(0, vocab_size=40\)",
        ),
        ({"kind": "adaptive", "adaptive": {"cutoffs": ()}}, "head.adaptive.cutoffs must be increasing ints in"),
        ({"kind": "adaptive", "adaptive": {"div_value": 0.5}}, r"div_value must be a finite number in \[1.0, inf\)"),
        ({"kind": "full", "full": {"chunk_size": -1}}, "chunk_size must be an int >= 0"),
        ({"kind": "full", "full": {"block_residuals": "half"}}, "block_residuals must be one of auto, bfloat16"),
    ],
)
def test_build_head_rejects_bad_config_on_the_host(change, message):
    with pytest.raises(ValueError, match=message):
        build_head(configured(change), VOCAB, COUNTS)


def test_build_head_rejects_counts_of_wrong_length_or_negative():
    with pytest.raises(ValueError, match=r"counts must be \[vocab_size=40\] non-negative"):
        build_head(BASE, VOCAB, COUNTS[:-1])
    with pytest.raises(ValueError, match=r"counts must be \[vocab_size=40\] non-negative"):
        build_head(BASE, VOCAB, np.where(np.arange(VOCAB) == 7, -1, COUNTS))


def test_log_uniform_proposal_rejects_a_vocabulary_that_is_not_frequency_sorted():
    unsorted = COUNTS.copy()
    unsorted[[10, 20]] = unsorted[[20, 10]]
    with pytest.raises(ValueError, match="counts must be frequency-sorted"):
        build_head(dataclasses.replace(BASE, kind="sampled", proposal="log_uniform"), VOCAB, unsorted)
    build_head(dataclasses.replace(BASE, kind="sampled", proposal="unigram"), VOCAB, unsorted)


def test_per_row_sampling_head_draws_each_row_its_own_samples_from_the_proposal():
    cfg = dataclasses.replace(BASE, kind="sampled", per_row_samples=True)
    head, variables, _, _, _ = init_and_apply(cfg)
    _, targets, _, _, _ = inputs()
    keys = jax.random.split(jax.random.key(5), 2000)
    ids = np.asarray(jax.jit(jax.vmap(lambda k: head.apply(variables, k, targets, method="draw")[0].ids))(keys))
    assert ids.shape == (len(keys), ROWS, BASE.num_samples)
    assert all(len({tuple(row) for row in draw}) == ROWS for draw in ids[:10])  # no two rows share a draw
    # Each row's ids over the keys: K draws per key from q (repeats included), a chi-square test per row.
    expected = len(keys) * BASE.num_samples * np.exp(np.asarray(head.proposal.log_probs, np.float64))
    for row in range(ROWS):
        observed = np.bincount(ids[:, row].ravel(), minlength=VOCAB)
        assert np.sum((observed - expected) ** 2 / expected) < 72.05, row  # chi-square(39) upper 0.1% point


def test_per_row_sampling_head_loss_is_the_sampled_softmax_over_each_rows_own_samples():
    cfg = dataclasses.replace(BASE, kind="sampled", per_row_samples=True)
    head, variables, loss, _, _ = init_and_apply(cfg)
    hidden, targets, key, mask, _ = inputs()
    ids = np.asarray(head.apply(variables, key, targets, method="draw")[0].ids)  # [N, K]
    targets, mask = np.asarray(targets), np.asarray(mask)
    params = variables["params"]
    scores = np.asarray(hidden, np.float64) @ np.asarray(params["weights"]).T + np.asarray(params["biases"])
    q = np.exp(np.asarray(head.proposal.log_probs, np.float64))
    log_count = np.log(1 - (1 - q) ** BASE.num_samples)  # an id among K draws, repeats dropped
    rows = np.arange(ROWS)
    target = scores[rows, targets] - log_count[targets]
    samples = np.take_along_axis(scores, ids, axis=1) - log_count[ids]
    repeat = np.array([[ids[r, k] in ids[r, :k] for k in range(ids.shape[1])] for r in rows])
    samples[repeat | (ids == targets[:, None])] = -np.inf  # repeats and accidental hits score nothing
    per_row = np.log(np.exp(target) + np.exp(samples).sum(axis=1)) - target
    np.testing.assert_allclose(loss, np.sum(per_row * mask) / np.sum(mask), rtol=1e-5)


def test_adaptive_head_bias_is_a_trained_head_parameter_only_when_asked():
    assert "head_biases" not in init_and_apply(dataclasses.replace(BASE, kind="adaptive"))[1]["params"]
    config = override(
        Config(),
        [
            "head.kind=adaptive",
            "head.adaptive.cutoffs=10",
            "head.adaptive.div_value=2",
            "head.adaptive.head_bias=true",
        ],
    )
    head = build_head(config.head, VOCAB, COUNTS)
    assert head.head_bias
    hidden, targets, key, mask, _ = inputs()
    init = jax.jit(lambda k: head.init({"params": k}, hidden, targets, k, mask, method="loss"))
    params = nn.meta.unbox(init(key))["params"]
    assert params["head_biases"].shape == (BASE.group("adaptive").cutoffs[0] + len(BASE.group("adaptive").cutoffs),)
    params = dict(params, head_biases=jax.random.normal(jax.random.key(9), params["head_biases"].shape))
    loss = jax.jit(lambda p: head.apply({"params": p}, hidden, targets, key, mask, method="loss")[0])
    log_probs = np.asarray(jax.jit(lambda p: head.apply({"params": p}, hidden, method="log_probs"))(params))
    np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, rtol=1e-5)
    expected = -(np.asarray(mask) * log_probs[np.arange(ROWS), np.asarray(targets)]).sum() / np.asarray(mask).sum()
    np.testing.assert_allclose(loss(params), expected, rtol=1e-5)
    assert float(jnp.abs(jax.grad(loss)(params)["head_biases"]).sum()) > 0


def test_adaptive_head_refuses_a_tail_projected_to_zero_dimensions():
    head = build_head(
        configured({"kind": "adaptive", "adaptive": {"cutoffs": (10, 25), "div_value": 4.0}}), VOCAB, COUNTS
    )
    hidden, targets, key, mask, _ = inputs()  # D = 8: the second tail would get 8 // 16 = 0
    with pytest.raises(ValueError, match=r"tail cluster 2 would project to .* \(D=8, div_value=4.0\)"):
        head.init({"params": key}, hidden, targets, key, mask, method="loss")
