"""SwiGLU's gate `gated_silu` (custom VJP that keeps only its inputs) against autodiff of
silu(gate) · up, over gates from far negative to far positive."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.models.transformer.blocks import gated_silu


def value_and_pullback(function, gate, up, cotangent):
    value, pullback = jax.vjp(function, gate, up)
    return value, pullback(cotangent)


def test_value_and_gradients_equal_autodiff_of_silu_times_up():
    keys = jax.random.split(jax.random.key(0), 3)
    gate = jnp.concatenate([jnp.linspace(-90.0, 90.0, 181), 4 * jax.random.normal(keys[0], (819,))]).reshape(40, 25)
    up, cotangent = (jax.random.normal(key, gate.shape) for key in keys[1:])
    got, (d_gate, d_up) = jax.jit(value_and_pullback, static_argnums=0)(gated_silu, gate, up, cotangent)
    expected, (e_gate, e_up) = jax.jit(value_and_pullback, static_argnums=0)(
        lambda g, u: nn.silu(g) * u, gate, up, cotangent
    )
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(d_gate, e_gate, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_up, e_up, rtol=1e-6, atol=1e-7)
    assert np.isfinite(d_gate).all()


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
def test_gradients_keep_the_operands_dtype(dtype):
    gate, up, cotangent = (jnp.linspace(-3.0, 3.0, 12, dtype=dtype) * s for s in (1, -1, 2))
    value, (d_gate, d_up) = value_and_pullback(gated_silu, gate, up, cotangent)
    assert value.dtype == d_gate.dtype == d_up.dtype == dtype
