"""The three decay schedules of ε (probability of the gold token) against their formulas."""

import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.objectives import exponential_decay, inverse_sigmoid_decay, linear_decay
from seqjax.objectives.schedules import gold_probability

steps = st.integers(min_value=0, max_value=200_000)


@settings(max_examples=50, deadline=None)
@given(steps, st.floats(0.01, 1.0), st.floats(0.0, 1e-2), st.floats(0.0, 1.0))
def test_linear_decay_is_max_of_floor_and_line(step, k, c, floor):
    eps_min = floor * k
    expected = max(eps_min, k - c * step)
    np.testing.assert_allclose(linear_decay(step, k=k, c=c, eps_min=eps_min), expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(steps, st.floats(0.5, 0.99999))
def test_exponential_decay_is_k_to_the_step(step, k):
    np.testing.assert_allclose(exponential_decay(step, k=k), k**step, rtol=1e-4, atol=1e-30)


@settings(max_examples=50, deadline=None)
@given(steps, st.floats(1.0, 5000.0))
def test_inverse_sigmoid_decay_is_k_over_k_plus_exp(step, k):
    expected = k / (k + math.exp(step / k)) if step / k < 700 else 0.0
    np.testing.assert_allclose(inverse_sigmoid_decay(step, k=k), expected, rtol=1e-4, atol=1e-30)


def test_schedules_accept_a_traced_step_and_agree_with_eager_values():
    traced = jax.jit(lambda s: gold_probability("inverse_sigmoid", s, k=50.0, c=0.0, eps_min=0.0))
    for step in (0, 100, 1000):
        np.testing.assert_allclose(traced(np.int32(step)), inverse_sigmoid_decay(step, k=50.0), rtol=1e-6)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: exponential_decay(1, k=1.0), "k must be a number in \\(0, 1\\) for the exponential"),
        (lambda: exponential_decay(1, k=1.5), "for the exponential schedule, got 1.5"),
        (lambda: exponential_decay(1, k=0.0), "for the exponential schedule, got 0.0"),
        (lambda: inverse_sigmoid_decay(1, k=0.5), "k must be a number >= 1 for the inverse_sigmoid"),
        (lambda: linear_decay(1, k=1.0, c=-0.1, eps_min=0.0), "c must be a number >= 0 for the linear schedule"),
        (lambda: linear_decay(1, k=1.2, c=0.1, eps_min=0.0), "k must be a number in \\(0, 1\\] for the linear"),
        (lambda: linear_decay(1, k=0.5, c=0.1, eps_min=0.6), "eps_min must be a number in \\[0, k=0.5\\]"),
        (lambda: gold_probability("cosine", 1, k=1.0, c=0.0, eps_min=0.0), "schedule must be one of"),
    ],
)
def test_bad_schedule_parameters_are_rejected_with_the_rule(call, message):
    with pytest.raises(ValueError, match=message):
        call()
