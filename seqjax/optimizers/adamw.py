"""AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, optax's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import optax

from seqjax.checks import check_rate
from seqjax.config import OPTIMIZERS, Options, option


@dataclasses.dataclass(frozen=True)
class AdamWOptions(Options):
    """AdamW's moment decay rates."""

    b1: float = option(0.9, "decay rate of the first moment (the gradient's running mean)", check=check_rate)
    b2: float = option(0.98, "decay rate of the second moment (the squared gradient's running mean)", check=check_rate)


def adamw(
    options: AdamWOptions,
    learning_rate: optax.Schedule,
    weight_decay: float,
    mask: Callable[[Any], Any] | None,
) -> optax.GradientTransformation:
    """optax's AdamW under `learning_rate`, decaying the parameters `mask` picks (None: all)."""
    return optax.adamw(learning_rate, b1=options.b1, b2=options.b2, weight_decay=weight_decay, mask=mask)


OPTIMIZERS.register("adamw", adamw, options=AdamWOptions)
