"""`SharedSettings`: what every optimizer is built under, whatever its kind."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import optax


@dataclasses.dataclass(frozen=True)
class SharedSettings:
    """The settings of `optim` every kind's builder reads, beside its own options.

    learning_rate: the warmup-then-decay schedule, step -> rate.
    weight_decay: optim.weight_decay; the update adds learning rate x weight_decay x parameter to
      the step of each parameter `mask` picks.
    mask: params -> a pytree of bools, the parameters optim.decay decays; None for every one.
    """

    learning_rate: optax.Schedule
    weight_decay: float
    mask: Callable[[Any], Any] | None
