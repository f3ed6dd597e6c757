"""The optimizer of a run: the one `optim.kind` names (each registers itself in its own module:
`OPTIMIZERS.register("adamw", adamw, options=AdamWOptions)`), under a warmup-then-decay learning
rate schedule, after global-norm gradient clipping. Gradient accumulation happens in the train
step, not here (one update per step).

An optimizer's builder takes (its options, the `SharedSettings` every kind reads: the
learning-rate schedule, optim.weight_decay and the weight-decay mask of optim.decay) and returns
an `optax.GradientTransformation` whose update adds learning rate x weight_decay x parameter to
the decayed parameters' steps, so that the schedule, clipping and decay mean the same whatever
the kind.
"""

from __future__ import annotations

import typing

import optax

from seqjax.checks import check_int, check_number, check_one_of
from seqjax.config import OPTIMIZERS, OptimConfig
from seqjax.config.sections import Decay, Schedule
from seqjax.optimizers import adafactor, adamw, lion, muon, sgd  # noqa: F401  (register the built-in optimizers)
from seqjax.optimizers.decay import decay_mask
from seqjax.optimizers.settings import SharedSettings


def validate(cfg: OptimConfig) -> None:
    """Raises ValueError naming the first optim key outside its rule."""
    check_one_of("optim.schedule", cfg.schedule, typing.get_args(Schedule))
    check_number("optim.learning_rate", cfg.learning_rate, 0.0, open_low=True)
    check_int("optim.warmup_steps", cfg.warmup_steps, 0)
    check_number("optim.end_lr_fraction", cfg.end_lr_fraction, 0.0, 1.0)
    check_number("optim.weight_decay", cfg.weight_decay, 0.0)
    check_one_of("optim.decay", cfg.decay, typing.get_args(Decay))
    check_number("optim.clip_norm", cfg.clip_norm, 0.0)
    check_int("optim.accum_steps", cfg.accum_steps)


def learning_rate_schedule(cfg: OptimConfig, total_steps: int) -> optax.Schedule:
    """Linear warmup to the peak, then cosine, linear or no decay until `total_steps`."""
    warmup = min(cfg.warmup_steps, max(total_steps - 1, 0))
    peak, end = cfg.learning_rate, cfg.learning_rate * cfg.end_lr_fraction
    decay_steps = max(total_steps - warmup, 1)
    if cfg.schedule == "cosine":
        decay = optax.cosine_decay_schedule(peak, decay_steps, alpha=cfg.end_lr_fraction)
    elif cfg.schedule == "linear":
        decay = optax.linear_schedule(peak, end, decay_steps)
    else:
        decay = optax.constant_schedule(peak)
    if warmup == 0:
        return decay
    return optax.join_schedules([optax.linear_schedule(0.0, peak, warmup), decay], [warmup])


def make_optimizer(cfg: OptimConfig, total_steps: int) -> optax.GradientTransformation:
    """Clipping (optim.clip_norm > 0), then `optim.kind`'s optimizer under the schedule."""
    validate(cfg)
    chain = [optax.clip_by_global_norm(cfg.clip_norm)] if cfg.clip_norm > 0 else []
    build = OPTIMIZERS[cfg.kind].build
    schedule = learning_rate_schedule(cfg, total_steps)
    chain.append(build(cfg.options, SharedSettings(schedule, cfg.weight_decay, decay_mask(cfg.decay))))
    return optax.chain(*chain)
