"""Row-sparse gradients: `compact` renumbering, and losses on compacted rows (sampling losses) or
gathered path rows (the tree) have the full table's gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from seqjax.heads.rows import compact

COMPACT = jax.jit(compact)


# Three lengths (one compilation each) with any values: compiling every length dominated the time.
@settings(max_examples=30, deadline=None)
@given(st.sampled_from([1, 7, 40]).flatmap(lambda n: st.lists(st.integers(0, 50), min_size=n, max_size=n)))
def test_compact_renumbers_ids_onto_their_distinct_values(values):
    ids = np.array(values, np.int32)
    distinct, local = COMPACT(ids)
    distinct, local = np.asarray(distinct), np.asarray(local)
    count = len(set(values))
    assert distinct.shape == ids.shape and local.shape == ids.shape
    np.testing.assert_array_equal(distinct[:count], np.unique(ids))
    np.testing.assert_array_equal(distinct[local], ids)


def test_compact_keeps_the_shape_of_its_ids_under_jit():
    ids = jnp.array([[7, 2, 7], [2, 9, 0]], jnp.int32)
    distinct, local = jax.jit(compact)(ids)
    assert local.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(distinct)[np.asarray(local)], np.asarray(ids))


@pytest.mark.parametrize("ids", [np.array([3, -1]), np.zeros((0,), np.int32)])
def test_compact_refuses_negative_or_no_ids(ids):
    with pytest.raises(ValueError, match="ids"):
        compact(ids)


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
    "sampled": lambda h, w, b, t, s, lq, tq: sampled_softmax_loss(h, w, b, t, s, lq, tq),
    "nce": lambda h, w, b, t, s, lq, tq: nce_loss(h, w, b, t, s, lq, tq, log_normalizer=0.5),
    "negative": lambda h, w, b, t, s, lq, tq: negative_sampling_loss(h, w, b, t, s),
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

    distinct, local = compact(np.concatenate([targets, samples.reshape(-1)]))
    local_targets, local_samples = local[:rows], local[rows:].reshape(shape)

    def sparse(row_weights, row_biases):
        args = (local_targets, local_samples, sample_log_counts, target_log_counts)
        return loss(hidden, row_weights, row_biases, *args).sum()

    assert_same_loss_and_table_gradient(dense, sparse, weights, biases, distinct)


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
