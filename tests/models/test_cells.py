"""Recurrent layers against the cell equations, written in numpy from random weights."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.models.recurrent.layers import Recurrent

B, T, D_IN, H = 3, 5, 4, 6


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_reference(x, w_ih, b, w_hh):
    c, h, outputs = np.zeros((B, H)), np.zeros((B, H)), []
    for t in range(x.shape[1]):
        i, f, g, o = np.split(x[:, t] @ w_ih + b + h @ w_hh, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs, 1)


def gru_reference(x, w_ih, b, w_hh, b_hn):
    h, outputs = np.zeros((B, H)), []
    for t in range(x.shape[1]):
        x_r, x_z, x_n = np.split(x[:, t] @ w_ih + b, 3, axis=-1)
        h_r, h_z, h_n = np.split(h @ w_hh, 3, axis=-1)
        r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
        n = np.tanh(x_n + r * (h_n + b_hn))
        h = (1 - z) * n + z * h
        outputs.append(h)
    return np.stack(outputs, 1)


def elman_reference(x, w_ih, b, w_hh):
    h, outputs = np.zeros((B, H)), []
    for t in range(x.shape[1]):
        h = np.tanh(x[:, t] @ w_ih + b + h @ w_hh)
        outputs.append(h)
    return np.stack(outputs, 1)


def random_layer(cell, reverse=False):
    """The layer with N(0, 0.25) weights, built directly: its init is not under test."""
    gates = {"lstm": 4, "gru": 3, "elman": 1}[cell] * H
    shapes = {"input_kernel": (D_IN, gates), "input_bias": (gates,), "recurrent_kernel": (H, gates)}
    if cell == "gru":
        shapes["recurrent_bias"] = (H,)
    keys = jax.random.split(jax.random.key(2), len(shapes) + 1)
    params = {name: 0.5 * jax.random.normal(k, shape) for k, (name, shape) in zip(keys, shapes.items())}
    x = jax.random.normal(keys[-1], (B, T, D_IN))
    return Recurrent(cell, D_IN, H, reverse=reverse), {"params": params}, x


def run(layer, params, x, mask=None):
    return jax.jit(layer.apply)(params, x, mask)


def reference(cell, params, x):
    p = {name: np.asarray(value, np.float64) for name, value in params["params"].items()}
    args = (np.asarray(x, np.float64), p["input_kernel"], p["input_bias"], p["recurrent_kernel"])
    if cell == "lstm":
        return lstm_reference(*args)
    if cell == "gru":
        return gru_reference(*args, p["recurrent_bias"])
    return elman_reference(*args)


@pytest.mark.parametrize("cell", ["lstm", "gru", "elman"])
def test_layer_outputs_follow_cell_equations(cell):
    layer, params, x = random_layer(cell)
    outputs, _ = run(layer, params, x)
    np.testing.assert_allclose(outputs, reference(cell, params, x), rtol=1e-5, atol=1e-5)


def test_reverse_layer_reads_the_sequence_backwards():
    cell = "gru"
    layer, params, x = random_layer(cell, reverse=True)
    outputs, _ = run(layer, params, x)
    expected = reference(cell, params, x[:, ::-1])[:, ::-1]
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


def test_masked_steps_leave_the_carry_unchanged():
    cell = "lstm"
    layer, params, x = random_layer(cell)
    lengths = np.array([T, 2, 0])
    mask = jnp.asarray(np.arange(T)[None, :] < lengths[:, None])
    outputs, final = run(layer, params, x, mask)
    full = reference(cell, params, x)
    np.testing.assert_allclose(outputs[0], full[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs[1, :2], full[1, :2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs[1, 2:], np.repeat(full[1, 1:2], T - 2, 0), atol=1e-5)
    np.testing.assert_allclose(outputs[2], 0.0)
    np.testing.assert_allclose(final[-1][1], full[1, 1], rtol=1e-5, atol=1e-5)
