"""Binary-tree softmax: tree construction (balanced depths, Huffman optimality), exactness."""

import heapq
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.heads import balanced_tree, huffman_tree, tree_log_probs, tree_softmax_loss


def optimal_code_cost(counts):
    """Σ counts·depth of an optimal prefix code: the sum of all merged weights of Huffman's heap."""
    heap = [float(c) for c in counts]
    heapq.heapify(heap)
    cost = 0.0
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        cost += merged
        heapq.heappush(heap, merged)
    return cost


def random_parameters(seed, vocab, rows=5, features=4):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(rows, features)).astype(np.float32),
        rng.normal(size=(vocab - 1, features)).astype(np.float32),
        rng.normal(size=(vocab - 1,)).astype(np.float32),
        rng.integers(0, vocab, size=rows).astype(np.int32),
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=2, max_size=60))
def test_huffman_tree_expected_code_length_is_optimal(counts):
    tree = huffman_tree(np.array(counts))
    np.testing.assert_allclose((np.array(counts) * tree.depths).sum(), optimal_code_cost(counts), rtol=1e-12)


@pytest.mark.parametrize("vocab", [2, 3, 5, 8, 13, 64, 1000])
def test_balanced_tree_depths_are_ceil_log2_v_or_one_less(vocab):
    depths = balanced_tree(vocab).depths
    ceiling = math.ceil(math.log2(vocab))
    assert set(depths.tolist()) <= {ceiling, ceiling - 1}


@pytest.mark.parametrize("vocab", [5, 13])
def test_tree_paths_are_distinct_prefix_free_codes(vocab):
    for tree in (balanced_tree(vocab), huffman_tree(np.arange(1, vocab + 1))):
        codes = {"".join(map(str, tree.codes[w][tree.mask[w]])) for w in range(vocab)}
        assert len(codes) == vocab
        assert not any(a != b and b.startswith(a) for a in codes for b in codes)
        assert np.all(tree.nodes[:, 0] == 0)  # every path starts at the root


@pytest.mark.parametrize("make_tree", [balanced_tree, lambda v: huffman_tree(np.arange(v, 0, -1) ** 2)])
def test_tree_log_probs_are_normalized_and_the_loss_is_their_negative_at_the_target(make_tree):
    vocab = 11
    hidden, node_weights, node_biases, targets = random_parameters(0, vocab)
    tree = make_tree(vocab)
    log_probs = tree_log_probs(hidden, node_weights, node_biases, tree)
    np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, rtol=1e-5)
    losses = tree_softmax_loss(hidden, node_weights, node_biases, targets, tree)
    np.testing.assert_allclose(losses, -log_probs[np.arange(len(targets)), targets], rtol=1e-5)


def test_tree_log_prob_is_sum_of_logistic_decisions_along_the_path():
    hidden, node_weights, node_biases, _ = random_parameters(1, 6, rows=1)
    tree = huffman_tree(np.array([9, 7, 5, 3, 2, 1]))
    log_sigmoid = lambda x: -np.log1p(np.exp(-x))  # noqa: E731
    scores = (hidden.astype(np.float64) @ node_weights.T + node_biases)[0]
    word = 5
    path = tree.nodes[word][tree.mask[word]]
    signs = 2.0 * tree.codes[word][tree.mask[word]] - 1.0
    expected = log_sigmoid(signs * scores[path]).sum()
    got = tree_log_probs(hidden, node_weights, node_biases, tree)[0, word]
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_tree_softmax_gradient_matches_gradient_of_log_probs():
    hidden, node_weights, node_biases, targets = random_parameters(2, 9)
    tree = huffman_tree(np.arange(1, 10))
    rows = np.arange(len(targets))
    grad_loss = jax.jit(jax.grad(lambda w: tree_softmax_loss(hidden, w, node_biases, targets, tree).sum()))
    grad_exact = jax.jit(jax.grad(lambda w: -tree_log_probs(hidden, w, node_biases, tree)[rows, targets].sum()))
    np.testing.assert_allclose(grad_loss(node_weights), grad_exact(node_weights), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("counts", [[3, 0, 2], [3, -1, 2], [5]])
def test_huffman_tree_rejects_non_positive_or_too_few_counts(counts):
    with pytest.raises(ValueError, match="counts must"):
        huffman_tree(np.array(counts))


def test_tree_softmax_loss_rejects_node_table_of_wrong_size():
    hidden, node_weights, node_biases, targets = random_parameters(3, 9)
    with pytest.raises(ValueError, match=r"node_weights must have shape \[9, 4\]"):
        tree_softmax_loss(hidden, node_weights[:8], node_biases, targets, balanced_tree(10))


def test_tree_softmax_loss_rejects_targets_outside_vocabulary():
    hidden, node_weights, node_biases, _ = random_parameters(4, 9)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 9\)"):
        tree_softmax_loss(hidden, node_weights, node_biases, np.full(5, 9, np.int32), balanced_tree(9))
