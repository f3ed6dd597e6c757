"""The softmax benchmark's floors (benchmarks/softmax_floors.py) do the work they stand for: the
blocked products are a softmax's three products (of its exponentials, with their row sums), over
every row of a table whose size is not a multiple of the block."""

import jax.numpy as jnp
import numpy as np
import pytest
from project_scripts import load_script

floors = load_script("benchmarks/softmax_floors.py", "softmax_benchmark_floors")


@pytest.mark.parametrize("exponentials", [False, True])
def test_blocked_products_are_the_dense_products_block_by_block(exponentials):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(6, 4)), jnp.float32)
    table = jnp.asarray(rng.normal(size=(11, 4)), jnp.float32)  # 11 rows: 3 blocks of 4, the last padded
    (x_grad, sums), table_grads = floors.blocked_products(x, table, 4, exponentials)
    scores = x @ table.T
    if exponentials:
        scores = jnp.exp(scores)
        # The padded row scores 0: its exponential, 1, joins each sum (a floor's values are read by no target).
        np.testing.assert_allclose(sums, scores.sum(axis=1) + 1.0, rtol=1e-5)
    else:
        np.testing.assert_array_equal(sums, 0.0)
    np.testing.assert_allclose(x_grad, scores @ table, rtol=1e-5, atol=1e-5)
    assert table_grads.shape == (3, 4, 4)
    np.testing.assert_allclose(table_grads.reshape(12, 4)[:11], scores.T @ x, rtol=1e-5, atol=1e-5)


def test_the_product_floor_is_the_products_of_a_matmul_and_its_gradients():
    rng = np.random.default_rng(1)
    x, table = (jnp.asarray(rng.normal(size=shape), jnp.float32) for shape in ((5, 3), (7, 3)))
    cotangent = jnp.asarray(rng.normal(size=(5, 7)), jnp.float32)
    out, (x_grad, table_grad) = floors.product_and_vjp(x, table, cotangent)
    np.testing.assert_allclose(out, x @ table.T, rtol=1e-6)
    np.testing.assert_allclose(x_grad, cotangent @ table, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(table_grad, cotangent.T @ x, rtol=1e-5, atol=1e-6)
