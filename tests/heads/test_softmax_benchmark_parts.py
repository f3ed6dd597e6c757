"""The softmax benchmark's cases (benchmarks/softmax_cases.py): the row-gradient tree cases
compute the tree loss and, put back into the table, the dense node-table gradient they are compared against."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from project_scripts import load_script

from seqjax.heads import balanced_tree, huffman_tree, tree_softmax_loss

bench = load_script("benchmarks/softmax_cases.py", "softmax_benchmark_cases")


@pytest.mark.parametrize("name", sorted(bench.TREE_ROW_GRADIENTS))
def test_tree_row_gradient_cases_give_the_tree_loss_and_node_table_gradient(name):
    vocab, shapes = 300, bench.Shapes(rows=32, features=8, samples=4)
    counts, hidden, targets = bench.make_inputs(vocab, shapes)
    run, total_bytes, _ = bench.tree_row_gradient_case(name, vocab, shapes, counts, hidden, targets)
    value, (hidden_grad, top_grad, top_bias_grad, row_grad, bias_grad), nodes = run()

    weights = jnp.asarray(0.05 * np.random.default_rng(2).normal(size=(vocab - 1, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab - 1,), jnp.float32)
    tree = huffman_tree(counts) if "Huffman" in name else balanced_tree(vocab)
    size = bench.top_size(tree, bench.TOP_LEVELS)
    assert 0 < size < vocab - 1  # both parts are exercised

    def dense(hidden, weights, biases):
        return tree_softmax_loss(hidden, weights, biases, targets, tree).mean()

    expected, (expected_hidden, expected_weights, expected_biases) = jax.value_and_grad(dense, argnums=(0, 1, 2))(
        hidden, weights, biases
    )
    assert total_bytes > 0
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    np.testing.assert_allclose(hidden_grad, expected_hidden, rtol=1e-5, atol=1e-7)
    weights_grad = jnp.zeros_like(weights).at[:size].add(top_grad).at[nodes].add(row_grad)
    biases_grad = jnp.zeros_like(biases).at[:size].add(top_bias_grad).at[nodes].add(bias_grad)
    np.testing.assert_allclose(weights_grad, expected_weights, atol=1e-7)
    np.testing.assert_allclose(biases_grad, expected_biases, atol=1e-7)
