"""A decode step's dense layers: (Wᵀ xᵀ)ᵀ for few rows equals the layer, and the transposed
kernel is computed once, outside the decode loop."""

import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.models.matmul import step_dense as step_dense_module
from seqjax.models.matmul.step_dense import FEW_ROWS, step_dense
from tests.jaxpr_tools import equations

IN, OUT = 7, 11
LAYERS = {
    "dense": (nn.Dense(OUT), (IN,)),
    "dense_no_bias": (nn.Dense(OUT, use_bias=False), (IN,)),
    "general_features": (nn.DenseGeneral((2, 3, 4)), (IN,)),
    "general_two_input_axes": (nn.DenseGeneral(OUT, axis=(-2, -1)), (3, 4)),
    "bfloat16": (nn.Dense(OUT, dtype=jnp.bfloat16), (IN,)),
}


class Wrapped(nn.Module):
    """The layer called plainly (`init`, reference) or through `step_dense`."""

    layer: nn.Module

    def __call__(self, x, step: bool = False):
        return step_dense(self.layer, x) if step else self.layer(x)


def _setup(name, leading):
    layer, inputs = LAYERS[name]
    model = Wrapped(layer)
    x = jax.random.normal(jax.random.key(0), (*leading, *inputs))
    variables = model.init(jax.random.key(1), x)
    bias = variables["params"]["layer"].get("bias")
    if bias is not None:  # nonzero, so a dropped bias shows
        variables["params"]["layer"]["bias"] = jax.random.normal(jax.random.key(2), bias.shape)
    return model, variables, x


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("leading", [(1,), (5, 1), (FEW_ROWS,), (FEW_ROWS + 1,)])
def test_step_dense_equals_the_layer(name, leading):
    model, variables, x = _setup(name, leading)
    expected = model.apply(variables, x)
    got = model.apply(variables, x, step=True)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    tolerance = 2e-2 if got.dtype == jnp.bfloat16 else 1e-5
    np.testing.assert_allclose(np.float32(got), np.float32(expected), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("rows, transposed", [(FEW_ROWS, True), (FEW_ROWS + 1, False)])
def test_only_few_rows_take_the_transposed_form(rows, transposed, monkeypatch):
    monkeypatch.setattr(step_dense_module, "compute_platform", lambda: "cpu")
    model, variables, x = _setup("dense", (rows,))
    jaxpr = jax.make_jaxpr(lambda v, x: model.apply(v, x, step=True))(variables, x).jaxpr
    assert bool(list(equations(jaxpr, "optimization_barrier"))) == transposed


@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_on_a_gpu_or_tpu_a_step_keeps_the_plain_product(platform, monkeypatch):
    monkeypatch.setattr(step_dense_module, "compute_platform", lambda: platform)
    model, variables, x = _setup("dense", (8,))
    jaxpr = jax.make_jaxpr(lambda v, x: model.apply(v, x, step=True))(variables, x).jaxpr
    assert not list(equations(jaxpr, "optimization_barrier"))
    np.testing.assert_allclose(model.apply(variables, x, step=True), model.apply(variables, x), rtol=1e-6)


def _computations(hlo: str) -> dict[str, str]:
    """Each computation of an HLO module's text, by name."""
    blocks = re.split(r"\n(?=(?:ENTRY )?%?[\w.\-]+ [^\n]*\{\n)", hlo)
    named = {}
    for block in blocks:
        match = re.match(r"(?:ENTRY )?%?([\w.\-]+) ", block)
        if match:
            named[match.group(1)] = block
    return named


def _reachable(named: dict[str, str], roots) -> set[str]:
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in named:
            continue
        seen.add(name)
        todo += re.findall(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)", named[name])
    return seen


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a property of the CPU compiler's program")
def test_the_transposed_kernel_is_computed_before_the_decode_loop():
    """The form is only fast because XLA hoists the kernel's transpose out of the loop; made
    at every step, it would cost more than the product it speeds up."""
    model, variables, x = _setup("dense", (3,))
    kernel_t = variables["params"]["layer"]["kernel"].T

    def decode(variables, x):
        def step(_, x):
            return jnp.tanh(model.apply(variables, x, step=True)[:, :IN])

        return jax.lax.fori_loop(0, 4, step, x)

    np.testing.assert_allclose(
        jax.jit(decode)(variables, x), decode(variables, x), rtol=1e-6, atol=1e-6
    )  # the barriers change no value
    hlo = jax.jit(decode).lower(variables, x).compile().as_text()
    named = _computations(hlo)
    bodies = re.findall(r"while\([^\n]*body=%?([\w.\-]+)", hlo)
    assert bodies, "the loop should compile to a while"
    in_loop = _reachable(named, bodies)
    # An instruction computing the transposed kernel's shape; the loop may pass it along.
    made = re.compile(rf"= f32\[{kernel_t.shape[0]},{kernel_t.shape[1]}\]\S* (?!parameter|get-tuple-element)[\w-]+\(")
    assert not any(made.search(named[name]) for name in in_loop), "the transposed kernel is made inside the loop"
    assert any(made.search(text) for text in named.values()), "the transposed kernel should be made before the loop"
