"""Training objectives: `objective(model, head, params, batch, key, step) -> (loss, metrics)`."""

from seqjax.config import ObjectiveConfig
from seqjax.objectives.teacher_forcing import teacher_forcing

OBJECTIVES = {"teacher_forcing": teacher_forcing}


def build_objective(cfg: ObjectiveConfig):
    if cfg.kind not in OBJECTIVES:
        raise ValueError(f"objective.kind must be one of {sorted(OBJECTIVES)}, got {cfg.kind!r}")
    return OBJECTIVES[cfg.kind]


__all__ = ["OBJECTIVES", "build_objective", "teacher_forcing"]
