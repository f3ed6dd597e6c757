"""Training objectives: what the model is fed and what it is judged on during training.

Each objective is a frozen dataclass whose fields are its options, checked when it is built,
and whose instances are called as `objective(model, head, params, batch, key, step, ids=ids)
-> (loss, metrics)` (`seqjax.contracts.Objective`): teacher forcing, scheduled sampling
(+ decay schedules), random replacement, the embedding gradient penalty, REINFORCE /
self-critical / MIXER with a sentence-BLEU reward, minimum-risk training, the VAE LM's ELBO,
ELMo's forward + backward LM loss, BERT's masked LM and ELECTRA (these four each for its own
model only). Each of the others works with any model that has the decode-step contract; all
work with any head.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from seqjax.config import OBJECTIVES, ObjectiveConfig
from seqjax.contracts import EvalSums, Model, Objective
from seqjax.objectives.bidirectional import BidirectionalLM
from seqjax.objectives.electra import Electra
from seqjax.objectives.gradient_penalty import GradientPenalty
from seqjax.objectives.masked_lm import MaskedLM
from seqjax.objectives.minimum_risk import MinimumRisk
from seqjax.objectives.random_replacement import RandomReplacement
from seqjax.objectives.reinforce import Mixer, Reinforce
from seqjax.objectives.scheduled_sampling import ScheduledSampling
from seqjax.objectives.schedules import exponential_decay, inverse_sigmoid_decay, linear_decay
from seqjax.objectives.teacher_forcing import TeacherForcing
from seqjax.objectives.vae import VAE


def feeds_gold_only(kind: str) -> bool:
    """Whether objective `kind` feeds only gold tokens (its class fact): packed rows' segments
    stay independent under it."""
    return bool(OBJECTIVES[kind].build.feeds_gold_only)


def objective_of(model: Any) -> type[Objective] | None:
    """The one objective that trains `model` (an instance or class stating it as its class fact
    `objective`), or None for a model any objective trains."""
    kind = getattr(model, "objective", None)
    return None if kind is None else OBJECTIVES[kind].build


def eval_sums_of(model: Model) -> Callable[..., EvalSums] | None:
    """How the model is scored in evaluation when its exact target NLL is not the measure: the
    `eval_sums` of the objective that trains it (`objective_of`), or None (the eval step sums
    the head's exact NLL of the targets)."""
    objective = objective_of(model)
    return None if objective is None else getattr(objective(), "eval_sums", None)


def build_objective(cfg: ObjectiveConfig) -> Objective:
    """`cfg.kind`'s objective (a registered kind, `OBJECTIVES`), its options already checked when
    `cfg` was built.

    Raises:
      ValueError: an unknown kind.
    """
    objective = OBJECTIVES[cfg.kind].build
    options = cfg.options
    if options is None:
        result: Objective = objective()
        return result
    result = objective(**{field.name: getattr(options, field.name) for field in dataclasses.fields(options)})
    return result


__all__ = [
    "BidirectionalLM",
    "Electra",
    "GradientPenalty",
    "MaskedLM",
    "MinimumRisk",
    "Mixer",
    "ObjectiveConfig",
    "RandomReplacement",
    "Reinforce",
    "ScheduledSampling",
    "TeacherForcing",
    "VAE",
    "build_objective",
    "eval_sums_of",
    "feeds_gold_only",
    "objective_of",
    "exponential_decay",
    "inverse_sigmoid_decay",
    "linear_decay",
]
