"""Row-sparse gradients: the sampling losses on the rows they read (`read_rows`, `gathered=True`)
and the tree loss on gathered path rows have the full table's gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.heads import (
    balanced_tree,
    huffman_tree,
    nce_loss,
    negative_sampling_loss,
    sampled_softmax_loss,
    tree_path_loss,
    tree_paths,
    tree_softmax_loss,
)
from seqjax.heads.rows import add_rows, read_rows


@pytest.mark.parametrize("samples", [np.array([3, 9, 3], np.int32), np.array([[3, 9], [0, 3]], np.int32)])
def test_read_rows_gathers_and_add_rows_scatters_back_summing_repeats(samples):
    weights = np.arange(40, dtype=np.float32).reshape(10, 4)
    biases = np.arange(10, dtype=np.float32) / 10
    targets = np.array([7, 3], np.int32)
    (target_rows, sample_rows), (target_biases, sample_biases) = read_rows(weights, biases, targets, samples)
    np.testing.assert_array_equal(target_rows, weights[targets])
    np.testing.assert_array_equal(sample_rows, weights[samples])
    np.testing.assert_array_equal(target_biases, biases[targets])
    np.testing.assert_array_equal(sample_biases, biases[samples])

    added = add_rows(np.zeros_like(weights), targets, samples, (target_rows, sample_rows))
    expected = np.zeros_like(weights)
    for row, id_ in zip(
        np.concatenate([weights[targets], weights[samples].reshape(-1, 4)]),
        np.concatenate([targets, samples.reshape(-1)]),
    ):
        expected[id_] += row  # id 3 is read twice or three times
    np.testing.assert_array_equal(added, expected)


def assert_same_loss_and_table_gradient(dense, sparse, weights, biases, index):
    """`sparse` on the rows weights[index], biases[index] has `dense`'s value on the whole table,
    and its row gradient scattered back by `index` is `dense`'s table gradient."""
    value, (weight_grad, bias_grad) = jax.value_and_grad(dense, argnums=(0, 1))(weights, biases)
    row_value, (row_weight_grad, row_bias_grad) = jax.value_and_grad(sparse, argnums=(0, 1))(
        weights[index], biases[index]
    )
    np.testing.assert_allclose(row_value, value, rtol=1e-6)
    scattered = jnp.zeros_like(weights).at[index].add(row_weight_grad)
    np.testing.assert_allclose(scattered, weight_grad, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jnp.zeros_like(biases).at[index].add(row_bias_grad), bias_grad, rtol=1e-5, atol=1e-6)


LOSSES = {
    "sampled": lambda h, w, b, t, s, lq, tq, **kw: sampled_softmax_loss(h, w, b, t, s, lq, tq, **kw),
    "nce": lambda h, w, b, t, s, lq, tq, **kw: nce_loss(h, w, b, t, s, lq, tq, log_normalizer=0.5, **kw),
    "negative": lambda h, w, b, t, s, lq, tq, **kw: negative_sampling_loss(h, w, b, t, s, **kw),
}


@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize("per_row", [False, True])
def test_row_gradients_equal_the_rows_of_the_dense_gradient(kind, per_row):
    rng = np.random.default_rng(0)
    rows, features, vocab, k = 6, 4, 40, 5
    hidden = rng.normal(size=(rows, features)).astype(np.float32)
    weights = rng.normal(size=(vocab, features)).astype(np.float32)
    biases = rng.normal(size=(vocab,)).astype(np.float32)
    targets = np.array([1, 3, 3, 7, 1, 20], np.int32)  # repeated targets
    shape = (rows, k) if per_row else (k,)
    samples = rng.integers(0, 8, size=shape).astype(np.int32)  # duplicates and accidental hits
    sample_log_counts = rng.normal(size=shape).astype(np.float32)
    target_log_counts = rng.normal(size=(rows,)).astype(np.float32)
    loss = LOSSES[kind]

    def dense(w, b):
        return loss(hidden, w, b, targets, samples, sample_log_counts, target_log_counts).sum()

    value, (weight_grad, bias_grad) = jax.value_and_grad(dense, argnums=(0, 1))(weights, biases)

    def sparse(row_weights, row_biases):
        args = (targets, samples, sample_log_counts, target_log_counts)
        return loss(hidden, row_weights, row_biases, *args, gathered=True).sum()

    rows, row_biases = read_rows(weights, biases, targets, samples)
    row_value, (rows_grad, row_biases_grad) = jax.value_and_grad(sparse, argnums=(0, 1))(rows, row_biases)
    np.testing.assert_allclose(row_value, value, rtol=1e-6)
    # Repeated ids (repeated targets, a target also sampled) keep a row each; add_rows sums them.
    np.testing.assert_allclose(add_rows(jnp.zeros_like(weights), targets, samples, rows_grad), weight_grad, atol=1e-6)
    np.testing.assert_allclose(
        add_rows(jnp.zeros_like(biases), targets, samples, row_biases_grad), bias_grad, atol=1e-6
    )


@pytest.mark.parametrize("kind", sorted(LOSSES))
def test_gathered_losses_refuse_rows_that_are_not_the_pair_read(kind):
    hidden, targets, samples = np.zeros((2, 4), np.float32), np.array([1, 3]), np.array([5, 6, 7])
    counts = (np.zeros(3, np.float32), np.zeros(2, np.float32))
    table, pair = np.zeros((40, 4), np.float32), (np.zeros((2, 4), np.float32), np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"weights must be the pair .* got ndarray"):
        LOSSES[kind](hidden, table, None, targets, samples, *counts, gathered=True)
    with pytest.raises(ValueError, match=r"weights: the samples' rows must have shape \(3, 4\), got \(2, 4\)"):
        LOSSES[kind](hidden, (pair[0], pair[0]), None, targets, samples, *counts, gathered=True)
    with pytest.raises(ValueError, match=r"biases: the targets' rows must have shape \(2,\), got \(40,\)"):
        LOSSES[kind](hidden, pair, (np.zeros(40), np.zeros(3)), targets, samples, *counts, gathered=True)


@pytest.mark.parametrize("make_tree", ["balanced", "huffman"])
def test_tree_loss_on_gathered_path_rows_has_the_dense_node_table_gradient(make_tree):
    rng = np.random.default_rng(1)
    rows, features, vocab = 7, 4, 23
    tree = balanced_tree(vocab) if make_tree == "balanced" else huffman_tree(rng.integers(1, 100, vocab))
    hidden = rng.normal(size=(rows, features)).astype(np.float32)
    weights = rng.normal(size=(vocab - 1, features)).astype(np.float32)
    biases = rng.normal(size=(vocab - 1,)).astype(np.float32)
    targets = np.array([0, 22, 5, 5, 13, 1, 22], np.int32)  # repeated targets share whole paths

    def dense(w, b):
        return tree_softmax_loss(hidden, w, b, targets, tree).sum()

    nodes, codes, mask = tree_paths(tree, targets)

    def sparse(path_weights, path_biases):
        return tree_path_loss(hidden, path_weights, path_biases, codes, mask).sum()

    assert_same_loss_and_table_gradient(dense, sparse, weights, biases, nodes)


def test_tree_path_loss_refuses_paths_that_do_not_match_the_hidden_rows():
    tree = balanced_tree(8)
    nodes, codes, mask = tree_paths(tree, np.array([1, 2, 3], np.int32))
    path_weights = np.zeros((3, nodes.shape[1], 4), np.float32)
    with pytest.raises(ValueError, match=r"hidden must have shape \(3, 4\)"):
        tree_path_loss(np.zeros((2, 4), np.float32), path_weights, None, codes, mask)
    with pytest.raises(ValueError, match="codes must have shape"):
        tree_path_loss(np.zeros((3, 4), np.float32), path_weights, None, codes[:, :1], mask)
