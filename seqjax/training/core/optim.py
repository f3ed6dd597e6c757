"""The optimizer: AdamW under a warmup-then-decay schedule with global-norm clipping."""

from __future__ import annotations

import optax

from seqjax.config import OptimConfig

SCHEDULES = ("cosine", "linear", "constant")


def validate(cfg: OptimConfig) -> None:
    if cfg.schedule not in SCHEDULES:
        raise ValueError(f"optim.schedule must be one of {', '.join(SCHEDULES)}, got {cfg.schedule!r}")
    if not cfg.learning_rate > 0:
        raise ValueError(f"optim.learning_rate must be > 0, got {cfg.learning_rate}")
    if cfg.warmup_steps < 0:
        raise ValueError(f"optim.warmup_steps must be >= 0, got {cfg.warmup_steps}")
    if not 0 <= cfg.end_lr_fraction <= 1:
        raise ValueError(f"optim.end_lr_fraction must be in [0, 1], got {cfg.end_lr_fraction}")
    if cfg.weight_decay < 0:
        raise ValueError(f"optim.weight_decay must be >= 0, got {cfg.weight_decay}")
    if not (0 <= cfg.b1 < 1 and 0 <= cfg.b2 < 1):
        raise ValueError(f"optim.b1 and optim.b2 must be in [0, 1), got {cfg.b1}, {cfg.b2}")
    if cfg.clip_norm < 0:
        raise ValueError(f"optim.clip_norm must be >= 0 (0 disables), got {cfg.clip_norm}")
    if cfg.accum_steps < 1:
        raise ValueError(f"optim.accum_steps must be >= 1, got {cfg.accum_steps}")


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
    """AdamW; gradient accumulation happens in the train step, not here (one update per step)."""
    validate(cfg)
    chain = [optax.clip_by_global_norm(cfg.clip_norm)] if cfg.clip_norm > 0 else []
    chain.append(
        optax.adamw(learning_rate_schedule(cfg, total_steps), b1=cfg.b1, b2=cfg.b2, weight_decay=cfg.weight_decay)
    )
    return optax.chain(*chain)
