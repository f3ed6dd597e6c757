"""Teacher forcing: the model is fed the gold prefix at every position."""

from __future__ import annotations

import jax
import flax.linen as nn

from seqjax.contracts import Batch, Params, SpecialIds
from seqjax.model_head import head_loss, hidden_states


def teacher_forcing(
    model: nn.Module, head: nn.Module, params: Params, batch: Batch, key: jax.Array, step: jax.Array, *,
    ids: SpecialIds,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Maximum likelihood on gold prefixes.

    Returns:
      loss: [] float32, the head's masked mean training loss.
      metrics: dict of [] float32, the head's aux values (at least "tokens").
    """
    del step, ids  # teacher forcing does not change over training and feeds only gold tokens
    model_key, head_key = jax.random.split(key)
    hidden = hidden_states(model, params, batch, model_key, train=True)
    return head_loss(model, head, params, hidden, batch, head_key)
