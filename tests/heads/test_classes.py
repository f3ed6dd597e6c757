"""Class-based softmax: equal-mass classes, normalized exact log-probs, loss consistency."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.heads import class_log_probs, class_softmax_loss, frequency_classes
from seqjax.heads.class_blocks import rows_per_step, slot_capacities, tiers_of, within_class_losses
from seqjax.heads.classes import Classes, _tier_of_class

COUNTS = np.array([50, 20, 10, 6, 5, 3, 2, 1, 1, 1, 1])


def random_parameters(seed, num_classes, vocab, rows=6, features=4):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(rows, features)).astype(np.float32),
        rng.normal(size=(num_classes, features)).astype(np.float32),
        rng.normal(size=(num_classes,)).astype(np.float32),
        rng.normal(size=(vocab, features)).astype(np.float32),
        rng.normal(size=(vocab,)).astype(np.float32),
        rng.integers(0, vocab, size=rows).astype(np.int32),
    )


def test_frequency_classes_are_contiguous_non_empty_and_cover_the_vocabulary():
    classes = frequency_classes(COUNTS, 4)
    assert classes.sizes.min() >= 1 and classes.sizes.sum() == len(COUNTS)
    np.testing.assert_array_equal(classes.class_of, np.repeat(np.arange(4), classes.sizes))
    np.testing.assert_array_equal(classes.starts, np.concatenate([[0], np.cumsum(classes.sizes)[:-1]]))


def test_frequency_classes_have_equal_mass_when_counts_allow_it():
    classes = frequency_classes(np.ones(12), 4)
    np.testing.assert_array_equal(classes.sizes, [3, 3, 3, 3])
    zipf = 1000.0 / np.arange(1, 2001)
    masses = np.bincount(frequency_classes(zipf, 10).class_of, weights=zipf) / zipf.sum()
    assert np.all(np.abs(masses[1:] - 0.1) < 0.02)  # class 0 holds the single heaviest word


@pytest.mark.parametrize("num_classes", [1, 3, 11])
def test_class_log_probs_are_normalized_and_the_loss_is_their_negative_at_the_target(num_classes):
    classes = frequency_classes(COUNTS, num_classes)
    hidden, cw, cb, ww, wb, targets = random_parameters(num_classes, num_classes, len(COUNTS))
    log_probs = class_log_probs(hidden, cw, cb, ww, wb, classes)
    np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, rtol=1e-5)
    losses = class_softmax_loss(hidden, cw, cb, ww, wb, targets, classes)
    np.testing.assert_allclose(losses, -log_probs[np.arange(len(targets)), targets], rtol=1e-5)


def test_class_log_prob_is_class_probability_times_within_class_probability():
    classes = frequency_classes(COUNTS, 3)
    hidden, cw, cb, ww, wb, _ = random_parameters(5, 3, len(COUNTS), rows=1)
    softmax = lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum()  # noqa: E731
    class_probs = softmax((hidden.astype(np.float64) @ cw.T + cb)[0])
    word_scores = (hidden.astype(np.float64) @ ww.T + wb)[0]
    word = 9
    c = classes.class_of[word]
    members = np.arange(classes.starts[c], classes.starts[c] + classes.sizes[c])
    expected = class_probs[c] * softmax(word_scores[members])[word - classes.starts[c]]
    got = np.exp(class_log_probs(hidden, cw, cb, ww, wb, classes)[0, word])
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_class_softmax_gradient_matches_gradient_of_log_probs():
    classes = frequency_classes(COUNTS, 3)
    hidden, cw, cb, ww, wb, targets = random_parameters(6, 3, len(COUNTS))
    rows = np.arange(len(targets))
    grad_loss = jax.jit(jax.grad(lambda w: class_softmax_loss(hidden, cw, cb, w, wb, targets, classes).sum()))
    grad_exact = jax.jit(jax.grad(lambda w: -class_log_probs(hidden, cw, cb, w, wb, classes)[rows, targets].sum()))
    np.testing.assert_allclose(grad_loss(ww), grad_exact(ww), rtol=1e-4, atol=1e-6)


def test_class_softmax_over_size_tiers_matches_log_probs_in_value_and_gradient():
    # Zipfian counts over 700 words in 6 equal-mass classes: sizes from 1 to hundreds of words,
    # so rows fall in several size tiers and bucket sizes (some tiers hold one or two rows).
    counts = np.round(1e5 / np.arange(1, 701)).astype(np.int64)
    classes = frequency_classes(counts, 6)
    assert classes.sizes.min() <= 64 < 256 < classes.sizes.max()
    hidden, cw, cb, ww, wb, _ = random_parameters(7, 6, 700, rows=37, features=5)
    targets = np.random.default_rng(8).choice(700, size=37, p=counts / counts.sum()).astype(np.int32)
    targets[:3] = [0, 350, 699]  # the first, a middle and the last class
    rows = np.arange(len(targets))

    def loss(h, w, b):
        return class_softmax_loss(h, cw, cb, w, b, targets, classes)

    def exact(h, w, b):
        return -class_log_probs(h, cw, cb, w, b, classes)[rows, targets]

    np.testing.assert_allclose(jax.jit(loss)(hidden, ww, wb), exact(hidden, ww, wb), rtol=1e-5)
    grads = jax.jit(jax.grad(lambda *a: loss(*a).sum(), argnums=(0, 1, 2)))(hidden, ww, wb)
    expected = jax.grad(lambda *a: exact(*a).sum(), argnums=(0, 1, 2))(hidden, ww, wb)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_class_softmax_walks_many_rows_of_one_class_and_windows_moved_back_from_the_end():
    # Sizes 1, 6, 3 share one tier of width 6: the last class's window starts 3 words before it.
    # 40 rows in the middle class take three steps of rows_per_step(43, 3) = 16 (the last one partial).
    sizes = np.array([1, 6, 3], np.int32)
    starts = np.array([0, 1, 7], np.int32)
    classes = Classes(starts, sizes, np.repeat(np.arange(3, dtype=np.int32), sizes))
    assert 40 > 2 * rows_per_step(43, 3)
    hidden, cw, cb, ww, wb, _ = random_parameters(9, 3, 10, rows=43, features=4)
    targets = np.concatenate([np.arange(40) % 6 + 1, [0, 7, 9]]).astype(np.int32)
    rows = np.arange(len(targets))
    cotangent = np.random.default_rng(10).normal(size=len(targets)).astype(np.float32)

    def loss(h, w, b):
        return jnp.vdot(cotangent, class_softmax_loss(h, cw, cb, w, b, targets, classes))

    def exact(h, w, b):
        return jnp.vdot(cotangent, -class_log_probs(h, cw, cb, w, b, classes)[rows, targets])

    np.testing.assert_allclose(jax.jit(loss)(hidden, ww, wb), exact(hidden, ww, wb), rtol=1e-5)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(hidden, ww, wb)
    for got, want in zip(grads, jax.grad(exact, argnums=(0, 1, 2))(hidden, ww, wb)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("num_classes", [0, 12])
def test_frequency_classes_rejects_class_counts_outside_one_to_vocab(num_classes):
    with pytest.raises(ValueError, match="num_classes must be"):
        frequency_classes(COUNTS, num_classes)


def test_frequency_classes_rejects_zero_counts():
    with pytest.raises(ValueError, match="counts must be finite and > 0"):
        frequency_classes(np.array([3, 0, 1]), 2)


def test_class_softmax_loss_rejects_class_table_of_wrong_size():
    classes = frequency_classes(COUNTS, 3)
    hidden, cw, cb, ww, wb, targets = random_parameters(7, 4, len(COUNTS))
    with pytest.raises(ValueError, match=r"class_weights must have shape \[3, 4\]"):
        class_softmax_loss(hidden, cw, None, ww, wb, targets, classes)


@pytest.mark.parametrize(
    "rows, num_classes, expected",
    [(1, 1, 8), (64, 8, 8), (65, 8, 16), (128, 8, 16), (129, 8, 32), (16384, 317, 64), (16384, 128, 128)],
)
def test_a_step_holds_the_rows_a_class_expects_rounded_up_to_a_power_of_two_and_at_least_eight(
    rows, num_classes, expected
):
    assert rows_per_step(rows, num_classes) == expected


@pytest.mark.parametrize("step_rows", [1, 3, 64])
def test_within_class_losses_are_the_same_whatever_rows_a_step_holds(step_rows):
    """One row per step, a step that ends inside a class's rows, and one step wider than the batch:
    the walk's padding rows drop out of the losses and the gradients."""
    classes = frequency_classes(np.arange(30, 0, -1), 5)
    hidden, _, _, ww, wb, targets = random_parameters(11, 5, 30, rows=37, features=4)
    targets = jnp.asarray(targets)
    class_of = jnp.asarray(classes.class_of)[targets]
    tiers = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes))
    cotangent = np.random.default_rng(12).normal(size=len(targets)).astype(np.float32)

    def loss(step_rows, h, w, b):
        return jnp.vdot(cotangent, within_class_losses(h, w, b, targets, class_of, tiers, step_rows))

    for got, want in zip(
        jax.jit(jax.value_and_grad(functools.partial(loss, step_rows), argnums=(0, 1, 2)))(hidden, ww, wb),
        jax.jit(jax.value_and_grad(functools.partial(loss, 0), argnums=(0, 1, 2)))(hidden, ww, wb),
    ):
        chex.assert_trees_all_close(got, want, rtol=1e-5, atol=1e-6)


def test_within_class_losses_reject_a_negative_step_size_naming_it():
    classes = frequency_classes(np.arange(4, 0, -1), 2)
    tiers = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes))
    zeros = jnp.zeros((3, 2))
    with pytest.raises(ValueError, match="step_rows must be an int >= 0, got -1"):
        within_class_losses(zeros, jnp.zeros((4, 2)), None, jnp.zeros(3, jnp.int32), jnp.zeros(3, jnp.int32), tiers, -1)


@pytest.mark.parametrize("rows, mesh_spec", [(64, "data:8"), (64, "data:4,model:2"), (60, "data:8")])
def test_under_a_mesh_each_device_walks_its_rows_and_the_loss_and_gradients_are_the_same(rows, mesh_spec):
    """Rows split over the batch axes (each device walks its own against the whole table, whose
    gradient the batch axes sum), or, where they do not divide the rows, one walk of them all."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from seqjax.placement import under_mesh
    from seqjax.training.core.layout import make_mesh

    classes = frequency_classes(np.arange(60, 0, -1), 8)
    arrays = random_parameters(13, 8, 60, rows=rows, features=8)
    cotangent = np.random.default_rng(14).normal(size=rows).astype(np.float32)

    def loss(hidden, cw, cb, ww, wb, targets):
        return jnp.vdot(cotangent, class_softmax_loss(hidden, cw, cb, ww, wb, targets, classes))

    value_and_grads = jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))
    mesh = make_mesh(mesh_spec, jax.devices()[:8])
    placed = [jax.device_put(x, NamedSharding(mesh, P())) for x in arrays]
    got = jax.jit(under_mesh(value_and_grads, mesh))(*placed)
    chex.assert_trees_all_close(got, jax.jit(value_and_grads)(*arrays), rtol=1e-5, atol=1e-5)


def test_frequency_classes_give_each_class_its_share_of_the_counts():
    classes = frequency_classes([50, 20, 10, 10, 5, 5], 3)  # {0}, {1}, {2, 3, 4, 5}
    np.testing.assert_allclose(classes.shares, [0.5, 0.2, 0.3])


def test_slot_capacities_hold_the_steps_of_batches_drawn_from_the_shares_and_none_without_them():
    counts = np.round(1e5 / np.arange(1, 701)).astype(np.int64)
    classes = frequency_classes(counts, 20)
    tiers = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes), classes.shares)
    step_rows = rows_per_step(512, 20)
    capacities = slot_capacities(tiers, 512, step_rows)
    assert capacities == slot_capacities(tiers, 512, step_rows)  # the same for the same shapes
    fitted = np.zeros(len(tiers))
    for seed in range(200):
        targets = np.random.default_rng(seed).choice(700, size=512, p=counts / counts.sum())
        steps = -(-np.bincount(classes.class_of[targets], minlength=20) // step_rows)
        fitted += [steps[tier.classes].sum() <= capacity for tier, capacity in zip(tiers, capacities)]
    # each tier holds the steps of about CAPACITY_QUANTILE of the batches, no more
    assert fitted.min() >= 0.82 * 200 and fitted.mean() <= 0.97 * 200, fitted
    # at least a step for each class a batch can reach, and not twice what one expects
    assert len(tiers) <= sum(capacities) < 2 * (20 + 512 // step_rows)
    unshared = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes))
    assert slot_capacities(unshared, 512, step_rows) == (0,) * len(tiers)


@pytest.mark.parametrize("fits", [True, False], ids=["within the slots", "beyond them"])
def test_the_walk_is_exact_within_its_slots_and_beyond_them_and_waits_on_the_host_only_for_the_rest(fits):
    """Targets drawn from the shares fit each tier's slots; all of them in the last class do not,
    and the steps beyond take each tier's loop of data-dependent trips. Either way value and
    gradients equal the exact log-probs'. The only loops of unknown trip count are those, one per
    tier forward and one backward; the slots are walked in loops of known trip count."""
    from jaxpr_tools import equations

    counts = np.round(1e5 / np.arange(1, 701)).astype(np.int64)
    classes = frequency_classes(counts, 20)
    hidden, cw, cb, ww, wb, _ = random_parameters(15, 20, 700, rows=256, features=4)
    tiers = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes), classes.shares)
    step_rows = rows_per_step(256, 20)

    def steps_beyond(targets):
        steps = -(-np.bincount(classes.class_of[targets], minlength=20) // step_rows)
        return max(steps[t.classes].sum() - c for t, c in zip(tiers, slot_capacities(tiers, 256, step_rows)))

    rng = np.random.default_rng(16)
    drawn = (rng.choice(700, size=256, p=counts / counts.sum()).astype(np.int32) for _ in range(20))
    targets = next(t for t in drawn if steps_beyond(t) <= 0) if fits else np.full(256, 699, np.int32)
    assert (steps_beyond(targets) <= 0) == fits
    rows = np.arange(256)
    cotangent = rng.normal(size=256).astype(np.float32)

    def loss(h, w, b):
        return jnp.vdot(cotangent, class_softmax_loss(h, cw, cb, w, b, targets, classes))

    def exact(h, w, b):
        return jnp.vdot(cotangent, -class_log_probs(h, cw, cb, w, b, classes)[rows, targets])

    value_and_grads = jax.value_and_grad(loss, argnums=(0, 1, 2))
    chex.assert_trees_all_close(
        jax.jit(value_and_grads)(hidden, ww, wb),
        jax.value_and_grad(exact, argnums=(0, 1, 2))(hidden, ww, wb),
        rtol=1e-4,
        atol=1e-5,
    )
    jaxpr = jax.make_jaxpr(value_and_grads)(hidden, ww, wb).jaxpr
    assert len(list(equations(jaxpr, "while"))) == 2 * len(tiers)
    # the slots: loops of known trip count, forward and backward
    capacities = slot_capacities(tiers, 256, step_rows)
    assert sum(eqn.params["length"] for eqn in equations(jaxpr, "scan")) == 2 * sum(capacities) > 0
