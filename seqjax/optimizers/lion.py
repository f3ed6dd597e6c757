"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), optax's: the sign of
an interpolation of the gradient and its running mean. Each step moves every weight by exactly
the learning rate, so Lion wants one 3-10x smaller than AdamW's, and a larger weight decay."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import optax

from seqjax.checks import check_rate
from seqjax.config import OPTIMIZERS, Options, option


@dataclasses.dataclass(frozen=True)
class LionOptions(Options):
    """Lion's two interpolation rates."""

    b1: float = option(0.9, "weight of the running mean against the gradient in the step's sign", check=check_rate)
    b2: float = option(0.99, "decay rate of the gradient's running mean", check=check_rate)


def lion(
    options: LionOptions,
    learning_rate: optax.Schedule,
    weight_decay: float,
    mask: Callable[[Any], Any] | None,
) -> optax.GradientTransformation:
    """optax's Lion under `learning_rate`, decaying the parameters `mask` picks (None: all)."""
    return optax.lion(learning_rate, b1=options.b1, b2=options.b2, weight_decay=weight_decay, mask=mask)


OPTIMIZERS.register("lion", lion, options=LionOptions)
