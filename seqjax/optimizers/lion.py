"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), optax's: the sign of
an interpolation of the gradient and its running mean. Each step moves every weight by exactly
the learning rate, so Lion wants one 3-10x smaller than AdamW's, and a larger weight decay."""

from __future__ import annotations

import dataclasses

import optax

from seqjax.checks import check_rate
from seqjax.config import OPTIMIZERS, Options, option
from seqjax.optimizers.settings import SharedSettings


@dataclasses.dataclass(frozen=True)
class LionOptions(Options):
    """Lion's two interpolation rates."""

    b1: float = option(0.9, "weight of the running mean against the gradient in the step's sign", check=check_rate)
    b2: float = option(0.99, "decay rate of the gradient's running mean", check=check_rate)


def lion(options: LionOptions, shared: SharedSettings) -> optax.GradientTransformation:
    """optax's Lion under `shared`'s schedule, decaying the parameters its mask picks."""
    return optax.lion(
        shared.learning_rate, b1=options.b1, b2=options.b2, weight_decay=shared.weight_decay, mask=shared.mask
    )


OPTIMIZERS.register("lion", lion, options=LionOptions)
