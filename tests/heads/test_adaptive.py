"""Adaptive softmax: exact normalized log-probs, and a loss exact for every row bucket."""

import jax
import numpy as np
import pytest

from seqjax.config import HeadConfig
from seqjax.heads import (
    AdaptiveOptions,
    adaptive_log_probs,
    adaptive_softmax_loss,
    build_head,
    expected_tail_capacities,
    tail_capacities,
    tail_dimensions,
)

VOCAB, FEATURES, CUTOFFS, DIV = 40, 8, (10, 25), 2.0
ADAPTIVE = HeadConfig(kind="adaptive", groups=(AdaptiveOptions(cutoffs=CUTOFFS, div_value=DIV),))


def random_parameters(seed, rows=37):
    rng = np.random.default_rng(seed)
    widths = tail_dimensions(FEATURES, len(CUTOFFS), DIV)
    bounds = CUTOFFS + (VOCAB,)
    return (
        rng.normal(size=(rows, FEATURES)).astype(np.float32),
        rng.normal(size=(CUTOFFS[0] + len(CUTOFFS), FEATURES)).astype(np.float32),
        [rng.normal(size=(FEATURES, w)).astype(np.float32) for w in widths],
        [rng.normal(size=(bounds[i + 1] - bounds[i], w)).astype(np.float32) for i, w in enumerate(widths)],
    )


def softmax(scores):
    exp = np.exp(scores - scores.max())
    return exp / exp.sum()


def test_tail_dimensions_divide_the_width_by_div_to_the_cluster_index():
    assert tail_dimensions(512, 3, 4.0) == (128, 32, 8)
    assert tail_dimensions(8, 3, 2.0) == (4, 2, 1)
    assert tail_dimensions(10, 2, 3.0) == (3, 1)  # D // div^i as PyTorch: 10 // 3, 10 // 9


@pytest.mark.parametrize(
    "features, clusters, div_value, cluster, power",
    [(8, 4, 4.0, 2, 2), (8, 4, 2.0, 4, 4), (3, 1, 4.0, 1, 1)],
)
def test_tail_dimensions_refuse_a_tail_of_width_zero_naming_the_cluster(features, clusters, div_value, cluster, power):
    message = (
        rf"tail cluster {cluster} would project to D // div_value\^{power} = 0 dimensions "
        rf"\(D={features}, div_value={div_value}\)"
    )
    with pytest.raises(ValueError, match=message):
        tail_dimensions(features, clusters, div_value)


def test_adaptive_log_probs_are_normalized():
    hidden, head, projections, tails = random_parameters(0)
    log_probs = adaptive_log_probs(hidden, head, projections, tails, CUTOFFS)
    assert log_probs.shape == (len(hidden), VOCAB)
    np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, rtol=1e-5)


def test_adaptive_log_prob_of_a_tail_word_is_cluster_probability_times_tail_probability():
    hidden, head, projections, tails = random_parameters(1, rows=1)
    h = hidden.astype(np.float64)[0]
    word = 30  # second tail cluster [25, 40)
    cluster_prob = softmax(head @ h)[CUTOFFS[0] + 1]
    tail_prob = softmax(tails[1] @ (h @ projections[1]))[word - CUTOFFS[1]]
    got = np.exp(adaptive_log_probs(hidden, head, projections, tails, CUTOFFS)[0, word])
    np.testing.assert_allclose(got, cluster_prob * tail_prob, rtol=1e-5)


@pytest.mark.parametrize(
    "targets",
    [
        np.random.default_rng(0).integers(0, VOCAB, 37),  # every cluster, mid-size buckets
        np.zeros(37, np.int64),  # tails empty
        np.full(37, VOCAB - 1),  # one tail holds every row: the largest bucket
        np.array([12] + [0] * 36),  # one row in a tail: the smallest bucket
    ],
    ids=["mixed", "shortlist_only", "last_tail_only", "single_tail_row"],
)
@pytest.mark.parametrize("gathered", [None, "fit", "overflow"], ids=["row_blocks", "tail_capacities", "over_capacity"])
def test_adaptive_loss_equals_negative_log_probs_at_the_target(targets, gathered):
    hidden, head, projections, tails = random_parameters(2)
    targets = targets.astype(np.int32)
    capacities = {None: None, "fit": tail_capacities(targets, CUTOFFS), "overflow": (1, 1)}[gathered]
    log_probs = adaptive_log_probs(hidden, head, projections, tails, CUTOFFS)
    loss = jax.jit(
        lambda t: adaptive_softmax_loss(hidden, head, projections, tails, t, CUTOFFS, tail_capacities=capacities)
    )(targets)
    np.testing.assert_allclose(loss, -log_probs[np.arange(len(targets)), targets], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gathered", [None, "fit", "overflow"], ids=["row_blocks", "tail_capacities", "over_capacity"])
def test_adaptive_loss_gradient_matches_gradient_of_log_probs(gathered):
    """Targets traced, as in a train step: a tail over its capacity takes the blocked path."""
    hidden, head, projections, tails = random_parameters(3)
    targets = np.random.default_rng(3).integers(0, VOCAB, len(hidden)).astype(np.int32)
    capacities = {None: None, "fit": tail_capacities(targets, CUTOFFS), "overflow": (1, 1)}[gathered]
    rows = np.arange(len(targets))

    def loss(targets, *params):
        return adaptive_softmax_loss(*params, targets, CUTOFFS, tail_capacities=capacities).sum()

    grad_loss = jax.jit(jax.grad(loss, argnums=(1, 2, 3, 4)))(targets, hidden, head, projections, tails)
    grad_exact = jax.jit(
        jax.grad(lambda *p: -adaptive_log_probs(*p, CUTOFFS)[rows, targets].sum(), argnums=(0, 1, 2, 3))
    )(hidden, head, projections, tails)
    for got, expected in zip(jax.tree.leaves(grad_loss), jax.tree.leaves(grad_exact)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cutoffs", [(25, 10), (10, 10), (0, 25), (-5, 25)])
def test_adaptive_loss_rejects_unsorted_or_non_positive_cutoffs(cutoffs):
    hidden, head, projections, tails = random_parameters(4)
    with pytest.raises(ValueError, match="cutoffs must be increasing ints in"):
        adaptive_softmax_loss(hidden, head, projections, tails, np.zeros(len(hidden), np.int32), cutoffs)


def test_adaptive_loss_rejects_tail_tables_that_do_not_match_the_cutoffs():
    hidden, head, projections, tails = random_parameters(5)
    with pytest.raises(ValueError, match=r"tail_weights\[0\] must have shape \[20, 4\]"):
        adaptive_softmax_loss(hidden, head, projections, tails, np.zeros(len(hidden), np.int32), (10, 30))


def test_tail_dimensions_rejects_div_value_below_one():
    with pytest.raises(ValueError, match=r"div_value must be a finite number in \[1.0, inf\), got 0.5"):
        tail_dimensions(8, 2, 0.5)


def test_head_biases_shift_the_head_scores_as_torch_head_bias():
    hidden, head, projections, tails = random_parameters(6, rows=1)
    biases = np.random.default_rng(6).normal(size=CUTOFFS[0] + len(CUTOFFS)).astype(np.float32)
    h = hidden.astype(np.float64)[0]
    head_probs = softmax(head @ h + biases)
    tail_probs = softmax(tails[0] @ (h @ projections[0]))
    expected = np.concatenate([head_probs[: CUTOFFS[0]], head_probs[CUTOFFS[0]] * tail_probs])
    got = np.exp(adaptive_log_probs(hidden, head, projections, tails, CUTOFFS, head_biases=biases))
    np.testing.assert_allclose(got[0, : CUTOFFS[1]], expected, rtol=1e-5)
    np.testing.assert_allclose(got.sum(), 1.0, rtol=1e-5)
    unbiased = adaptive_log_probs(hidden, head, projections, tails, CUTOFFS)
    assert not np.allclose(np.exp(unbiased), got)


def test_adaptive_loss_with_head_biases_equals_negative_log_probs_and_trains_the_biases():
    hidden, head, projections, tails = random_parameters(7)
    biases = np.random.default_rng(7).normal(size=CUTOFFS[0] + len(CUTOFFS)).astype(np.float32)
    targets = np.random.default_rng(7).integers(0, VOCAB, len(hidden)).astype(np.int32)
    rows = np.arange(len(targets))
    loss = adaptive_softmax_loss(hidden, head, projections, tails, targets, CUTOFFS, head_biases=biases)
    log_probs = adaptive_log_probs(hidden, head, projections, tails, CUTOFFS, head_biases=biases)
    np.testing.assert_allclose(loss, -log_probs[rows, targets], rtol=1e-5, atol=1e-5)

    def summed_loss(b):
        return adaptive_softmax_loss(hidden, head, projections, tails, targets, CUTOFFS, head_biases=b).sum()

    def exact_nll(b):
        return -adaptive_log_probs(hidden, head, projections, tails, CUTOFFS, head_biases=b)[rows, targets].sum()

    grad = jax.grad(summed_loss)(biases)
    assert np.abs(grad).sum() > 0
    np.testing.assert_allclose(grad, jax.grad(exact_nll)(biases), rtol=1e-4, atol=1e-5)


def test_adaptive_functions_reject_head_biases_of_the_wrong_size():
    hidden, head, projections, tails = random_parameters(8)
    with pytest.raises(ValueError, match=r"head_biases must have shape \[12\] or be None"):
        adaptive_log_probs(hidden, head, projections, tails, CUTOFFS, head_biases=np.zeros(VOCAB))


def test_tail_capacities_round_each_tails_row_count_up_to_its_bucket():
    targets = np.array([0] * 3 + [CUTOFFS[0]] * 9 + [VOCAB - 1] * 1)  # 9 rows in tail 1, 1 in tail 2
    assert tail_capacities(targets, CUTOFFS) == (10, 1)


def test_expected_tail_capacities_cover_the_mean_plus_margin_standard_deviations():
    mean, deviation = 2048 * 0.2, np.sqrt(2048 * 0.2 * 0.8)
    (capacity,) = expected_tail_capacities(2048, (0.2,))
    assert mean + 3 * deviation < capacity <= mean + 3 * deviation + 9 and capacity % 8 == 0
    assert expected_tail_capacities(10, (1.0, 0.0)) == (10, 8)


@pytest.mark.parametrize("shares", [(0.5, 1.5), (-0.1, 0.2)])
def test_expected_tail_capacities_refuse_a_share_outside_zero_one(shares):
    with pytest.raises(ValueError, match="tail_shares must be in \\[0, 1\\]"):
        expected_tail_capacities(16, shares)


def test_the_adaptive_head_gathers_each_tail_by_its_share_of_the_counts():
    counts = np.zeros(VOCAB)
    counts[: CUTOFFS[0]], counts[CUTOFFS[0] : CUTOFFS[1]], counts[CUTOFFS[1] :] = 70.0, 20.0, 10.0
    head = build_head(ADAPTIVE, VOCAB, counts)
    smoothed = counts + 1.0
    expected = (smoothed[CUTOFFS[0] : CUTOFFS[1]].sum(), smoothed[CUTOFFS[1] :].sum())
    np.testing.assert_allclose(head.tail_shares, np.array(expected) / smoothed.sum())


@pytest.mark.parametrize("traced", [False, True], ids=["concrete", "traced"])
def test_the_adaptive_head_is_exact_for_a_batch_far_beyond_its_tails_expected_shares(traced):
    counts = np.zeros(VOCAB)
    counts[: CUTOFFS[0]] = 1000.0  # the tails expect about 1% of the targets
    head = build_head(ADAPTIVE, VOCAB, counts)
    hidden = np.random.default_rng(8).normal(size=(37, FEATURES)).astype(np.float32)
    targets = np.full(37, VOCAB - 1, np.int32)  # every row in the last tail
    params = head.init(jax.random.key(0), hidden, targets, method="target_log_probs")

    def target_log_probs(targets):
        return head.apply(params, hidden, targets, method="target_log_probs")

    got = jax.jit(target_log_probs)(targets) if traced else target_log_probs(targets)
    log_probs = head.apply(params, hidden, method="log_probs")
    np.testing.assert_allclose(got, log_probs[:, VOCAB - 1], rtol=1e-5, atol=1e-5)


def test_adaptive_loss_rejects_a_tail_capacity_below_its_targets_on_the_host():
    hidden, head, projections, tails = random_parameters(6)
    targets = np.full(len(hidden), VOCAB - 1, np.int32)  # every row in the last tail
    with pytest.raises(
        ValueError, match=f"tail_capacities\\[1\\] must hold the {len(hidden)} targets in tail cluster 2"
    ):
        adaptive_softmax_loss(hidden, head, projections, tails, targets, CUTOFFS, tail_capacities=(1, len(hidden) - 1))


def test_under_a_mesh_the_blocked_tail_walk_reads_tables_made_whole_before_it_not_in_each_block():
    """A sharding constraint inside the walk's loop is a gather of the tail at every block."""
    from jaxpr_tools import equations

    from seqjax.placement import under_mesh
    from seqjax.training.core.layout import make_mesh

    hidden, head, projections, tails = random_parameters(11, rows=64)
    targets = np.random.default_rng(12).integers(0, VOCAB, size=64)
    mesh = make_mesh("data:8", jax.devices()[:8])

    def loss(hidden, projections, tails):  # no capacities: every tail on the blocked walk
        return adaptive_softmax_loss(hidden, head, projections, tails, targets, CUTOFFS).sum()

    jaxpr = jax.make_jaxpr(under_mesh(jax.grad(loss, argnums=(0, 1, 2)), mesh))(hidden, projections, tails).jaxpr
    loops = list(equations(jaxpr, "while"))
    assert loops and len(list(equations(jaxpr, "sharding_constraint"))) > 0
    assert not [eqn for loop in loops for eqn in equations(loop.params["body_jaxpr"].jaxpr, "sharding_constraint")]
