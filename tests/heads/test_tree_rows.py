"""split_paths / split_path_loss: the tree loss with a dense top and gathered deep nodes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.heads import balanced_tree, huffman_tree, tree_softmax_loss
from seqjax.heads.tree_rows import deep_capacity, deep_steps, split_path_loss, split_paths, top_size

VOCAB, FEATURES, ROWS = 37, 6, 11
COUNTS = np.maximum(1, np.round(1000 / np.arange(1, VOCAB + 1)))  # Zipfian: Huffman depths 2..9


def problem(seed):
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    weights = rng.normal(size=(VOCAB - 1, FEATURES)).astype(np.float32)
    biases = rng.normal(size=(VOCAB - 1,)).astype(np.float32)
    targets = rng.choice(VOCAB, size=ROWS, p=COUNTS / COUNTS.sum()).astype(np.int32)
    return hidden, weights, biases, targets


def dense_value_and_grads(tree, hidden, weights, biases, targets):
    """The tree softmax loss summed over rows and its gradients for hidden, weights and biases; the
    targets are an argument, so problems of one shape on one tree share a compiled program."""

    def loss(hidden, weights, biases, targets):
        return tree_softmax_loss(hidden, weights, biases, targets, tree).sum()

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(hidden, weights, biases, targets)


def split_value_and_table_grads(tree, top_levels, hidden, weights, biases, targets, capacity=None):
    """The split loss and its gradients, the top's and the deep rows' put back into [V - 1] tables."""
    capacity = deep_capacity(tree, targets, top_levels) if capacity is None else capacity
    paths = split_paths(tree, targets, top_levels, capacity)
    size = top_size(tree, top_levels)
    value, grads = jax.jit(jax.value_and_grad(lambda *a: split_path_loss(*a, paths).sum(), argnums=(0, 1, 2, 3, 4)))(
        hidden, weights[:size], biases[:size], weights[paths.step_nodes], biases[paths.step_nodes]
    )
    hidden_grad, top_w, top_b, deep_w, deep_b = grads
    weights_grad = jnp.zeros_like(weights).at[:size].add(top_w).at[paths.step_nodes].add(deep_w)
    biases_grad = jnp.zeros_like(biases).at[:size].add(top_b).at[paths.step_nodes].add(deep_b)
    return value, (hidden_grad, weights_grad, biases_grad)


@pytest.mark.parametrize("top_levels", [0, 3, 20])  # all deep, split, all top
@pytest.mark.parametrize("make_tree", [lambda: huffman_tree(COUNTS), lambda: balanced_tree(VOCAB)])
def test_split_loss_and_gradients_equal_the_tree_softmax_loss(make_tree, top_levels):
    tree, (hidden, weights, biases, targets) = make_tree(), problem(top_levels)
    value, grads = dense_value_and_grads(tree, hidden, weights, biases, targets)
    split_value, split_grads = split_value_and_table_grads(tree, top_levels, hidden, weights, biases, targets)
    np.testing.assert_allclose(split_value, value, rtol=1e-5)
    for got, expected in zip(split_grads, grads):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spare", [0, 7])  # no padding steps after the real ones, and some
def test_split_gradients_equal_the_tree_softmax_gradients_at_any_capacity_that_holds_the_steps(spare):
    tree, (hidden, weights, biases, targets) = huffman_tree(COUNTS), problem(5)
    capacity = int(deep_steps(tree, targets, 2).sum()) + spare
    value, grads = dense_value_and_grads(tree, hidden, weights, biases, targets)
    split_value, split_grads = split_value_and_table_grads(tree, 2, hidden, weights, biases, targets, capacity)
    np.testing.assert_allclose(split_value, value, rtol=1e-5)
    for got, expected in zip(split_grads, grads):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_row_steps_index_each_rows_packed_deep_steps_in_path_order():
    tree, (_, _, _, targets) = huffman_tree(COUNTS), problem(6)
    paths = split_paths(tree, targets, 2, deep_capacity(tree, targets, 2))
    steps = deep_steps(tree, targets, 2)
    step_rows, row_steps = np.asarray(paths.step_rows), np.asarray(paths.row_steps)
    assert row_steps.shape == (ROWS, tree.nodes.shape[1] - 2)
    for row in range(ROWS):
        packed = row_steps[row, : steps[row]]
        np.testing.assert_array_equal(packed, np.arange(steps[:row].sum(), steps[: row + 1].sum()))
        assert (step_rows[packed] == row).all() and (row_steps[row, steps[row] :] == -1).all()
    real = np.asarray(tree.mask[targets])[:, 2:]
    np.testing.assert_array_equal(np.asarray(paths.step_nodes)[row_steps[real]], tree.nodes[targets][:, 2:][real])


def test_split_loss_and_gradients_stay_exact_where_the_scores_saturate_log_sigmoid():
    """Scores of about ±100: −log σ and its slope from one exponential neither overflow nor lose
    the linear part of the loss."""
    tree, (hidden, weights, biases, targets) = huffman_tree(COUNTS), problem(4)
    hidden = 40.0 * hidden
    value, grads = dense_value_and_grads(tree, hidden, weights, biases, targets)
    split_value, split_grads = split_value_and_table_grads(tree, 3, hidden, weights, biases, targets)
    assert np.isfinite(split_value) and value > 100.0
    np.testing.assert_allclose(split_value, value, rtol=1e-5)
    for got, expected in zip(split_grads, grads):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_split_losses_per_row_equal_the_tree_softmax_losses_under_jit_with_spare_capacity():
    tree, (hidden, weights, biases, targets) = huffman_tree(COUNTS), problem(1)
    capacity = deep_capacity(tree, targets, 2) + 5

    @jax.jit
    def losses(targets):
        paths = split_paths(tree, targets, 2, capacity)
        size = top_size(tree, 2)
        return split_path_loss(
            hidden, weights[:size], biases[:size], jnp.asarray(weights)[paths.step_nodes], None, paths
        )

    expected = tree_softmax_loss(
        hidden, weights, np.where(np.arange(VOCAB - 1) < top_size(tree, 2), biases, 0), targets, tree
    )
    np.testing.assert_allclose(losses(targets), expected, rtol=1e-5)


def test_deep_steps_are_the_path_steps_below_the_top_levels_row_by_row():
    tree, targets = huffman_tree(COUNTS), problem(2)[3]
    paths = split_paths(tree, targets, 3, deep_capacity(tree, targets, 3))
    real = np.asarray(paths.step_signs) != 0
    expected = [(n, int(node)) for n, t in enumerate(targets) for node in tree.nodes[t, 3 : tree.depths[t]]]
    got = list(zip(np.asarray(paths.step_rows)[real].tolist(), np.asarray(paths.step_nodes)[real].tolist()))
    assert got == expected and not real[len(expected) :].any()


@pytest.mark.parametrize("steps, capacity", [(1, 1), (8, 8), (9, 10), (17, 20), (100, 112), (1025, 1280)])
def test_deep_capacity_rounds_up_to_four_buckets_per_doubling(steps, capacity):
    tree = balanced_tree(4)  # every path 2 steps: `steps` targets below depth 1 have `steps` steps
    assert deep_capacity(tree, np.zeros(steps, np.int32), 1) == capacity


def test_split_paths_rejects_a_capacity_below_the_targets_deep_steps_on_the_host():
    tree, targets = huffman_tree(COUNTS), problem(3)[3]
    needed = int(deep_steps(tree, targets, 2).sum())
    with pytest.raises(ValueError, match=f"capacity must hold the targets' {needed} steps below depth 2, got"):
        split_paths(tree, targets, 2, needed - 1)


def test_top_size_rejects_negative_levels():
    with pytest.raises(ValueError, match="top_levels must be an int >= 0, got -1"):
        top_size(balanced_tree(4), -1)
