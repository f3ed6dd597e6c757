"""The softmax benchmark's cases (benchmarks/softmax_cases.py): the row-gradient sampling and tree
cases compute their loss and, put back into the table, the dense table gradient they are compared against."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from project_scripts import load_script

from seqjax.heads import (
    balanced_tree,
    huffman_tree,
    nce_loss,
    negative_sampling_loss,
    sampled_softmax_loss,
    samplers,
    tree_softmax_loss,
)
from seqjax.heads.rows import add_rows

bench = load_script("benchmarks/softmax_cases.py", "softmax_benchmark_cases")


@pytest.mark.parametrize("name", sorted(bench.ROW_GRADIENT_LOSSES))
def test_sampling_row_gradient_cases_give_the_loss_and_table_gradient(name):
    vocab, shapes = 300, bench.Shapes(rows=32, features=8, samples=16)
    counts, hidden, targets = bench.make_inputs(vocab, shapes)
    run, _, _ = bench.row_gradient_case(name, vocab, shapes, counts, hidden, targets)
    value, (hidden_grad, rows_grad, row_biases_grad), samples = run()

    proposal, unique, kind = bench.ROW_GRADIENT_LOSSES[name]
    sampler = samplers.log_uniform(vocab) if proposal == "log_uniform" else samplers.unigram(counts, 0.75)
    drawn = sampler.sample(jax.random.key(0), shapes.samples, unique=unique)  # the case's key
    weights = jnp.asarray(0.05 * np.random.default_rng(2).normal(size=(vocab, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab,), jnp.float32)

    def dense(hidden, weights, biases):
        args = (hidden, weights, biases, targets, drawn.ids)
        if kind == "negative":
            return negative_sampling_loss(*args).mean()
        target_counts = sampler.log_expected_count(targets, shapes.samples, unique=unique)
        return (sampled_softmax_loss if kind == "sampled" else nce_loss)(
            *args, drawn.log_expected_counts, target_counts
        ).mean()

    expected, (expected_hidden, expected_weights, expected_biases) = jax.value_and_grad(dense, argnums=(0, 1, 2))(
        hidden, weights, biases
    )
    np.testing.assert_array_equal(samples, drawn.ids)
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    np.testing.assert_allclose(hidden_grad, expected_hidden, rtol=1e-5, atol=1e-7)
    weights_grad = add_rows(jnp.zeros_like(weights), targets, samples, rows_grad)
    np.testing.assert_allclose(weights_grad, expected_weights, atol=1e-7)
    np.testing.assert_allclose(
        add_rows(jnp.zeros_like(biases), targets, samples, row_biases_grad), expected_biases, atol=1e-7
    )


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
