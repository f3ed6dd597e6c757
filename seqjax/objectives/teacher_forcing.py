"""Teacher forcing: the model is fed the gold prefix at every position."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax

from seqjax.config import OBJECTIVES, Options
from seqjax.contracts import Batch, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import head_loss, hidden_states


@dataclasses.dataclass(frozen=True)
class TeacherForcingOptions(Options):
    """Teacher forcing has no options."""


@dataclasses.dataclass(frozen=True)
class TeacherForcing(TeacherForcingOptions, Objective):
    """Maximum likelihood on gold prefixes: position t is fed the gold token t − 1 and judged
    on the gold token t, −(1/N) Σ_t mask_t · log p(y_t | y_<t), as the head computes it.
    It has no options and does not change over training."""

    feeds_gold_only: ClassVar[bool] = True  # a packed row's segments stay independent under it

    def __call__(
        self,
        model: Model,
        head: Head,
        params: Params,
        batch: Batch,
        key: jax.Array,
        step: jax.Array,
        *,
        ids: SpecialIds,
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Returns:
        loss: [] float32, the head's masked mean training loss.
        metrics: dict of [] float32, the head's aux values (at least "tokens").
        """
        del step, ids  # teacher forcing does not change over training and feeds only gold tokens
        model_key, head_key = jax.random.split(key)
        hidden = hidden_states(model, params, batch, model_key, train=True)
        return head_loss(model, head, params, hidden, batch, head_key)


OBJECTIVES.register("teacher_forcing", TeacherForcing, options=TeacherForcingOptions)
