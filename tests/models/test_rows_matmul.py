"""`rows_matmul` (custom VJP whose weight gradient reads a row-major xᵀ) and `rows_dot_general`
(the same for `nn.Dense`) against autodiff of the plain product: values, gradients, dtypes,
and the compiled weight gradient's operand layout that is the reason for them."""

import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.models.matmul.rows_matmul import row_major_transpose, rows_dot_general, rows_matmul


def value_and_pullback(function, x, kernel, cotangent):
    value, pullback = jax.vjp(function, x, kernel)
    return value, pullback(cotangent)


def operands(rows, depth, features, dtype=jnp.float32):
    keys = jax.random.split(jax.random.key(rows * depth + features), 3)
    x = jax.random.normal(keys[0], (rows, depth)).astype(dtype)
    kernel = jax.random.normal(keys[1], (depth, features)).astype(dtype)
    return x, kernel, jax.random.normal(keys[2], (rows, features))


@pytest.mark.parametrize("rows, depth, features", [(1, 1, 1), (7, 5, 3), (64, 32, 48)])
def test_value_and_gradients_equal_autodiff_of_the_product(rows, depth, features):
    x, kernel, cotangent = operands(rows, depth, features)
    got, (d_x, d_kernel) = jax.jit(value_and_pullback, static_argnums=0)(rows_matmul, x, kernel, cotangent)
    expected, (e_x, e_kernel) = jax.jit(value_and_pullback, static_argnums=0)(jnp.matmul, x, kernel, cotangent)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d_x, e_x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d_kernel, e_kernel, rtol=1e-5, atol=1e-5)


def test_bfloat16_operands_accumulated_in_float32():
    x, kernel, cotangent = operands(16, 24, 8, jnp.bfloat16)
    wide = lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32)  # noqa: E731
    got, (d_x, d_kernel) = value_and_pullback(lambda a, b: rows_matmul(a, b, jnp.float32), x, kernel, cotangent)
    expected, (e_x, e_kernel) = value_and_pullback(wide, x, kernel, cotangent)
    assert got.dtype == jnp.float32 and d_x.dtype == d_kernel.dtype == jnp.bfloat16
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    for g, e in ((d_x, e_x), (d_kernel, e_kernel)):
        np.testing.assert_allclose(np.float32(g), np.float32(e), rtol=2e-2, atol=2e-2)


def test_row_major_transpose_is_the_transpose():
    x = jnp.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(row_major_transpose(x), x.T)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a property of the CPU compiler's program")
def test_weight_gradient_compiles_without_a_leading_axis_contracted():
    x, kernel, _ = operands(256, 64, 128)
    hlo = jax.jit(jax.grad(lambda k: rows_matmul(x, k).sum())).lower(kernel).compile().as_text()
    dots = re.findall(r" dot\(.*", hlo)
    assert dots and not any("lhs_contracting_dims={0}" in dot for dot in dots), dots


@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 5)])  # [N, D] through rows_matmul; [B, T, D] unchanged
def test_dense_with_rows_dot_general_equals_plain_dense(shape):
    x = jax.random.normal(jax.random.key(1), shape)
    plain, rows = nn.Dense(4), nn.Dense(4, dot_general=rows_dot_general)
    params = plain.init(jax.random.key(2), x)

    def loss(module, params, x):
        return jnp.sum(jnp.sin(module.apply(params, x)))

    expected = jax.value_and_grad(lambda p, x: loss(plain, p, x), argnums=(0, 1))(params, x)
    got = jax.value_and_grad(lambda p, x: loss(rows, p, x), argnums=(0, 1))(params, x)
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
