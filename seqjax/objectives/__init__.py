"""Training objectives: `objective(model, head, params, batch, key, step) -> (loss, metrics)`.

What the model is fed and what it is judged on during training: teacher forcing, scheduled
sampling (+ decay schedules), random replacement, the embedding gradient penalty,
REINFORCE / self-critical / MIXER with a sentence-BLEU reward, and minimum-risk training.
Each one works with any model that has the decode-step contract and any head.
"""

from __future__ import annotations

import functools

from seqjax.config import ObjectiveConfig
from seqjax.objectives.gradient_penalty import check_gradient_penalty, gradient_penalty
from seqjax.objectives.minimum_risk import check_minimum_risk, minimum_risk
from seqjax.objectives.random_replacement import check_random_replacement, random_replacement
from seqjax.objectives.reinforce import check_mixer, check_reinforce, mixer, reinforce
from seqjax.objectives.scheduled_sampling import check_scheduled_sampling, scheduled_sampling
from seqjax.objectives.schedules import exponential_decay, inverse_sigmoid_decay, linear_decay
from seqjax.objectives.teacher_forcing import teacher_forcing

OBJECTIVES = {
    "teacher_forcing": teacher_forcing,
    "scheduled_sampling": scheduled_sampling,
    "random_replacement": random_replacement,
    "gradient_penalty": gradient_penalty,
    "reinforce": reinforce,
    "mixer": mixer,
    "minimum_risk": minimum_risk,
}

# The ObjectiveConfig fields each objective takes as keyword arguments.
OPTIONS = {
    "teacher_forcing": (),
    "scheduled_sampling": ("schedule", "k", "c", "eps_min", "feed", "mode", "passes", "first_pass_grad"),
    "random_replacement": ("sequence_rate", "token_rate", "pool"),
    "gradient_penalty": ("penalty",),
    "reinforce": ("samples", "baseline", "mle_weight"),
    "mixer": ("samples", "baseline", "mle_weight", "delta_start", "delta_growth", "delta_every"),
    "minimum_risk": ("samples", "candidates", "alpha", "mle_weight"),
}

_CHECKS = {
    "teacher_forcing": lambda: None,
    "scheduled_sampling": check_scheduled_sampling,
    "random_replacement": check_random_replacement,
    "gradient_penalty": check_gradient_penalty,
    "reinforce": check_reinforce,
    "mixer": check_mixer,
    "minimum_risk": check_minimum_risk,
}


def objective_options(cfg: ObjectiveConfig) -> dict:
    """The keyword arguments of `cfg.kind`'s objective, taken from `cfg` and checked on the host.

    Raises:
      ValueError: an unknown kind, or an option outside its rule, named as `objective.<field>`.
    """
    if cfg.kind not in OBJECTIVES:
        raise ValueError(f"objective.kind must be one of {sorted(OBJECTIVES)}, got {cfg.kind!r}")
    options = {name: getattr(cfg, name) for name in OPTIONS[cfg.kind]}
    try:
        _CHECKS[cfg.kind](**options)
    except ValueError as error:
        raise ValueError(f"objective.{error}") from None
    return options


def build_objective(cfg: ObjectiveConfig):
    """`cfg.kind`'s objective with `cfg`'s options bound: f(model, head, params, batch, key, step)."""
    options = objective_options(cfg)
    return functools.partial(OBJECTIVES[cfg.kind], **options)


__all__ = [
    "OBJECTIVES",
    "build_objective",
    "exponential_decay",
    "gradient_penalty",
    "inverse_sigmoid_decay",
    "linear_decay",
    "minimum_risk",
    "mixer",
    "objective_options",
    "random_replacement",
    "reinforce",
    "scheduled_sampling",
    "teacher_forcing",
]
