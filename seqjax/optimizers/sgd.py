"""Stochastic gradient descent with (heavy-ball or Nesterov) momentum, from optax's parts, and
weight decay decoupled from the momentum as AdamW's is: the step is learning rate x (momentum
+ weight_decay x parameter)."""

from __future__ import annotations

import dataclasses

import optax

from seqjax.checks import check_rate
from seqjax.config import OPTIMIZERS, Options, option
from seqjax.optimizers.settings import SharedSettings


@dataclasses.dataclass(frozen=True)
class SGDOptions(Options):
    """SGD's momentum."""

    momentum: float = option(0.9, "decay rate of the gradients' running sum (0: plain SGD)", check=check_rate)
    nesterov: bool = option(False, "Nesterov momentum: the step looks ahead along the running sum")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.nesterov and self.momentum == 0.0:
            raise ValueError(f"nesterov needs momentum > 0 (a running sum to look ahead along), got {self.momentum!r}")


def sgd(options: SGDOptions, shared: SharedSettings) -> optax.GradientTransformation:
    """Momentum, then the decay of the parameters `shared`'s mask picks, under its schedule."""
    momentum = optax.trace(options.momentum, nesterov=options.nesterov) if options.momentum else optax.identity()
    return optax.chain(
        momentum,
        optax.add_decayed_weights(shared.weight_decay, shared.mask),
        optax.scale_by_learning_rate(shared.learning_rate),
    )


OPTIMIZERS.register("sgd", sgd, options=SGDOptions)
