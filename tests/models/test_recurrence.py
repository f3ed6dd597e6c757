"""The hand-written backward pass of the recurrence equals autodiff of the equations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.models.recurrent.cells import GATES, UPDATES
from seqjax.models.recurrent.recurrence import RecurrenceInputs, recurrence

T, B, H = 4, 3, 5


def unrolled(cell, reverse, gates_x, valid, carry, kernel, bias):
    """The recurrence as a Python loop of the cell equations, differentiated by JAX."""
    steps = range(T - 1, -1, -1) if reverse else range(T)
    outputs = [None] * T
    for t in steps:
        new = UPDATES[cell](carry, gates_x[t], carry[-1] @ kernel, bias)
        if valid is not None:
            new = tuple(jnp.where(valid[t][:, None], n, o) for n, o in zip(new, carry))
        carry = new
        outputs[t] = carry[-1]
    return jnp.stack(outputs), carry


def inputs(cell):
    keys = jax.random.split(jax.random.key(0), 5)
    gates_x = jax.random.normal(keys[0], (T, B, GATES[cell] * H))
    kernel = 0.5 * jax.random.normal(keys[1], (H, GATES[cell] * H))
    bias = jax.random.normal(keys[2], (H,)) if cell == "gru" else ()
    size = 2 if cell == "lstm" else 1
    carry = tuple(jax.random.normal(k, (B, H)) for k in jax.random.split(keys[3], size))
    weights = jax.random.normal(keys[4], (T, B, H))
    return gates_x, carry, kernel, bias, weights


@pytest.mark.parametrize(
    "cell, reverse, masked",
    [("lstm", False, True), ("gru", True, True), ("elman", True, False)],
)
def test_recurrence_gradients_equal_autodiff_of_the_unrolled_equations(cell, reverse, masked):
    gates_x, carry, kernel, bias, weights = inputs(cell)
    valid = jnp.asarray(np.random.default_rng(0).random((T, B)) < 0.7) if masked else None

    def loss(fn, gates_x, carry, kernel, bias):
        outputs, final = fn(cell, reverse, gates_x, valid, carry, kernel, bias)
        return jnp.sum(outputs * weights) + sum(jnp.sum(c**2) for c in final)

    def custom(cell, reverse, *args):
        return recurrence(cell, jnp.float32, reverse, RecurrenceInputs(*args))

    args = (gates_x, carry, kernel, bias)
    got = jax.jit(jax.grad(lambda *a: loss(custom, *a), argnums=(0, 1, 2, 3)))(*args)
    want = jax.jit(jax.grad(lambda *a: loss(unrolled, *a), argnums=(0, 1, 2, 3)))(*args)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
