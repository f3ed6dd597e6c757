"""AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, optax's."""

from __future__ import annotations

import dataclasses

import optax

from seqjax.checks import check_number
from seqjax.config import OPTIMIZERS, option


@dataclasses.dataclass(frozen=True)
class AdamWOptions:
    """AdamW's moment decay rates."""

    b1: float = option(0.9, "decay rate of the first moment (the gradient's running mean)")
    b2: float = option(0.98, "decay rate of the second moment (the squared gradient's running mean)")

    def __post_init__(self) -> None:
        for name in ("b1", "b2"):
            if check_number(name, getattr(self, name), 0.0) >= 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")


def adamw(options: AdamWOptions, learning_rate: optax.Schedule, weight_decay: float) -> optax.GradientTransformation:
    """optax's AdamW under `learning_rate`, decaying every parameter by `weight_decay`."""
    return optax.adamw(learning_rate, b1=options.b1, b2=options.b2, weight_decay=weight_decay)


OPTIMIZERS.register("adamw", adamw, options=AdamWOptions)
