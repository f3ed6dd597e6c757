"""Adafactor (Shazeer & Stern 2018), optax's: the second moment of a matrix kept as its row and
column means (R + C numbers for an R x C matrix, where Adam keeps 2 R C), the update clipped by
its RMS and scaled by the parameter's RMS, no first moment unless asked.

Weight decay follows the rule shared by every optimizer here (learning rate x weight_decay x
parameter per step), not optax's default of weight_decay x parameter with no learning rate.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import optax

from seqjax.checks import check_rate, integer, number
from seqjax.config import OPTIMIZERS, Options, option
from seqjax.optimizers.settings import SharedSettings


@dataclasses.dataclass(frozen=True)
class AdafactorOptions(Options):
    """Adafactor's factoring, clipping and scaling."""

    factored: bool = option(True, "keep a matrix's second moment as row and column means (else whole, as Adam)")
    min_dim_size_to_factor: int = option(
        128,
        "a parameter is factored when its two largest dimensions are at least this (smaller ones kept whole)",
        check=integer(),
    )
    decay_rate: float = option(0.8, "the second moment's decay is 1 - (step + 1)^-decay_rate", check=number(0.0))
    clipping_threshold: float = option(1.0, "each update's RMS is clipped to this; 0 disables", check=number(0.0))
    multiply_by_parameter_scale: bool = option(True, "steps relative to the parameter's RMS (at least 1e-3)")
    momentum: float = option(0.0, "decay rate of a first moment (0: none, Adafactor's memory saving)", check=check_rate)


def adafactor(options: AdafactorOptions, shared: SharedSettings) -> optax.GradientTransformation:
    """optax's Adafactor under `shared`'s schedule, decaying the parameters its mask picks."""

    def decay(step: Any) -> Any:  # per step: learning rate x weight_decay
        return shared.learning_rate(step) * shared.weight_decay

    return optax.adafactor(
        shared.learning_rate,
        min_dim_size_to_factor=options.min_dim_size_to_factor,
        decay_rate=options.decay_rate,
        multiply_by_parameter_scale=options.multiply_by_parameter_scale,
        clipping_threshold=options.clipping_threshold or None,
        momentum=options.momentum or None,
        weight_decay_rate=decay if shared.weight_decay else None,
        weight_decay_mask=shared.mask,
        factored=options.factored,
    )


OPTIMIZERS.register("adafactor", adafactor, options=AdafactorOptions)
