"""Decay schedules for scheduled sampling (Bengio et al. 2015).

ε is the probability of feeding the *gold* token, as in the paper: training starts near
ε = 1 (teacher forcing) and ε decays towards 0 (the model feeds itself). Some libraries
call the complementary probability (of feeding the model's token) the sampling rate; here
ε always means gold.

Each schedule takes the optimizer step (a Python int or a traced int32 scalar) and static
float parameters, checked on the host, and returns ε: [] float32 in [0, 1].
"""

from __future__ import annotations

import math
import typing
from typing import Literal

import jax
import jax.numpy as jnp

from seqjax.checks import is_real

EpsilonSchedule = Literal["linear", "exponential", "inverse_sigmoid"]  # scheduled sampling's decay of ε
SCHEDULES = typing.get_args(EpsilonSchedule)


def linear_decay(step: int | jax.Array, *, k: float, c: float, eps_min: float) -> jax.Array:
    """ε = max(eps_min, k − c·step): 0 < k ≤ 1, c ≥ 0, 0 ≤ eps_min ≤ k. Returns [] float32."""
    check_linear(k, c, eps_min)
    step = jnp.asarray(step, jnp.float32)
    return jnp.maximum(jnp.float32(eps_min), k - c * step)


def exponential_decay(step: int | jax.Array, *, k: float) -> jax.Array:
    """ε = k**step, 0 < k < 1. Returns [] float32."""
    check_exponential(k)
    # exp(step·log k) rather than k**step: one float32 power for any (traced) step.
    return jnp.exp(jnp.asarray(step, jnp.float32) * jnp.float32(math.log(k)))


def inverse_sigmoid_decay(step: int | jax.Array, *, k: float) -> jax.Array:
    """ε = k / (k + exp(step / k)), k ≥ 1 (ε = k / (k + 1) at step 0). Returns [] float32."""
    check_inverse_sigmoid(k)
    # k / (k + e^x) = sigmoid(log k − x), which stays finite where e^x overflows float32.
    return jax.nn.sigmoid(jnp.float32(math.log(k)) - jnp.asarray(step, jnp.float32) / k)


def gold_probability(schedule: str, step: int | jax.Array, *, k: float, c: float, eps_min: float) -> jax.Array:
    """ε of the named schedule at `step`; c and eps_min are used by the linear schedule only."""
    check_schedule(schedule, k=k, c=c, eps_min=eps_min)
    if schedule == "linear":
        return linear_decay(step, k=k, c=c, eps_min=eps_min)
    if schedule == "exponential":
        return exponential_decay(step, k=k)
    return inverse_sigmoid_decay(step, k=k)


def check_linear(k: float, c: float, eps_min: float) -> None:
    if not is_real(k) or not 0.0 < k <= 1.0:
        raise ValueError(f"k must be a number in (0, 1] for the linear schedule, got {k!r}")
    if not is_real(c) or c < 0.0:
        raise ValueError(f"c must be a number >= 0 for the linear schedule, got {c!r}")
    if not is_real(eps_min) or not 0.0 <= eps_min <= k:
        raise ValueError(f"eps_min must be a number in [0, k={k}] for the linear schedule, got {eps_min!r}")


def check_exponential(k: float) -> None:
    if not is_real(k) or not 0.0 < k < 1.0:
        raise ValueError(f"k must be a number in (0, 1) for the exponential schedule, got {k!r}")


def check_inverse_sigmoid(k: float) -> None:
    if not is_real(k) or k < 1.0:
        raise ValueError(f"k must be a number >= 1 for the inverse_sigmoid schedule, got {k!r}")


def check_schedule(schedule: str, *, k: float, c: float, eps_min: float) -> None:
    """Host check of a schedule name and the parameters that schedule uses."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if schedule == "linear":
        check_linear(k, c, eps_min)
    elif schedule == "exponential":
        check_exponential(k)
    else:
        check_inverse_sigmoid(k)
