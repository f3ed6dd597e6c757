"""AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, optax's; with `nesterov`,
NAdamW (Dozat 2016's Nesterov momentum in the first moment)."""

from __future__ import annotations

import dataclasses

import optax

from seqjax.checks import check_rate
from seqjax.config import OPTIMIZERS, Options, option
from seqjax.optimizers.settings import SharedSettings


@dataclasses.dataclass(frozen=True)
class AdamWOptions(Options):
    """AdamW's moment decay rates and momentum."""

    b1: float = option(0.9, "decay rate of the first moment (the gradient's running mean)", check=check_rate)
    b2: float = option(0.98, "decay rate of the second moment (the squared gradient's running mean)", check=check_rate)
    nesterov: bool = option(False, "Nesterov momentum in the first moment (NAdamW)")


def adamw(options: AdamWOptions, shared: SharedSettings) -> optax.GradientTransformation:
    """optax's AdamW under `shared`'s schedule, decaying the parameters its mask picks."""
    return optax.adamw(
        shared.learning_rate,
        b1=options.b1,
        b2=options.b2,
        weight_decay=shared.weight_decay,
        mask=shared.mask,
        nesterov=options.nesterov,
    )


OPTIMIZERS.register("adamw", adamw, options=AdamWOptions)
