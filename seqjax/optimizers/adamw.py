"""AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, optax's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import optax

from seqjax.config import OPTIMIZERS, option
from seqjax.optimizers.rates import check_rates


@dataclasses.dataclass(frozen=True)
class AdamWOptions:
    """AdamW's moment decay rates."""

    b1: float = option(0.9, "decay rate of the first moment (the gradient's running mean)")
    b2: float = option(0.98, "decay rate of the second moment (the squared gradient's running mean)")

    def __post_init__(self) -> None:
        check_rates(self, "b1", "b2")


def adamw(
    options: AdamWOptions,
    learning_rate: optax.Schedule,
    weight_decay: float,
    mask: Callable[[Any], Any] | None,
) -> optax.GradientTransformation:
    """optax's AdamW under `learning_rate`, decaying the parameters `mask` picks (None: all)."""
    return optax.adamw(learning_rate, b1=options.b1, b2=options.b2, weight_decay=weight_decay, mask=mask)


OPTIMIZERS.register("adamw", adamw, options=AdamWOptions)
