"""Joint training of ELMo's forward and backward language models (model.kind=bilm).

On a row of targets y [B, T], the forward LM predicts y_t from the inputs up to t (the
targets shifted right, as every LM is fed) and the backward LM predicts y_t from y_{t+1:},
read from the end: its inputs are the targets shifted left, with `</s>` after a row's last
valid target (the boundary a backward LM starts from, as `</s>` starts the forward one).
Both directions' hidden states go to the same head; the loss is the mean of the two
directions' losses (Peters et al. 2018 maximize the sum of the two log-likelihoods).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from seqjax.contracts import Batch, EvalSums, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import head_loss, hidden_states, token_nll
from seqjax.objective_config import BidirectionalLMOptions


def backward_inputs(targets: jax.Array, mask: jax.Array, boundary_id: int) -> jax.Array:
    """What the backward LM reads at each position: targets [B, T] int32 shifted left by one,
    `boundary_id` where the next position holds no target (mask [B, T] float32).

    Returns [B, T] int32: row t is target t + 1, so the backward state at t, having read
    positions t..T−1, has seen exactly the targets after t.
    """
    following = jnp.concatenate([targets[:, 1:], jnp.full_like(targets[:, :1], boundary_id)], axis=1)
    next_valid = jnp.concatenate([mask[:, 1:] > 0, jnp.zeros_like(mask[:, :1], bool)], axis=1)
    return jnp.where(next_valid, following, boundary_id)


def backward_hidden(
    model: Model, params: Params, batch: Batch, key: jax.Array, *, train: bool, boundary_id: int
) -> jax.Array:
    """The backward LM's hidden states [B, T, D] float32 for the batch's targets (row t predicts target t)."""
    mask = batch["mask"] > 0
    return model.apply(
        {"params": params["model"]},
        backward_inputs(batch["targets"], batch["mask"], boundary_id),
        mask=mask,
        train=train,
        rngs={"dropout": key},
        method="backward",
    )


def direction_nlls(model: Model, head: Head, params: Params, batch: Batch, *, boundary_id: int) -> dict[str, jax.Array]:
    """Exact sums over the unmasked targets, [] float32 each: "forward" and "backward" NLL
    (the head's exact log-probabilities, no dropout) and "tokens"."""
    key = jax.random.key(0)
    mask = batch["mask"]
    forward = token_nll(model, head, params, hidden_states(model, params, batch, key, train=False), batch["targets"])
    backward = token_nll(
        model,
        head,
        params,
        backward_hidden(model, params, batch, key, train=False, boundary_id=boundary_id),
        batch["targets"],
    )
    return {"forward": (forward * mask).sum(), "backward": (backward * mask).sum(), "tokens": mask.sum()}


@dataclasses.dataclass(frozen=True)
class BidirectionalLM(BidirectionalLMOptions, Objective):
    """ELMo's joint objective: (forward LM loss + backward LM loss) / 2, each the head's
    masked mean over the row's targets. It has no options and does not change over training."""

    def eval_sums(
        self, model: Model, head: Head, params: Params, batch: Batch, key: jax.Array, *, ids: SpecialIds
    ) -> EvalSums:
        """The forward LM's exact NLL as any LM's, and the backward LM's beside it:
        (Σ forward NLL, target tokens, {"backward_nll": Σ backward NLL})."""
        del key
        nlls = direction_nlls(model, head, params, batch, boundary_id=ids.eos)
        return nlls["forward"], nlls["tokens"], {"backward_nll": nlls["backward"]}

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
        loss: [] float32, the mean of the two directions' head losses.
        metrics: dict of [] float32: the forward head's aux, "forward_loss", "backward_loss".
        """
        del step  # the objective does not change over training
        forward_key, backward_key, forward_head_key, backward_head_key = jax.random.split(key, 4)
        forward = hidden_states(model, params, batch, forward_key, train=True)
        backward = backward_hidden(model, params, batch, backward_key, train=True, boundary_id=ids.eos)
        forward_loss, metrics = head_loss(model, head, params, forward, batch, forward_head_key)
        backward_loss, _ = head_loss(model, head, params, backward, batch, backward_head_key)
        return 0.5 * (forward_loss + backward_loss), dict(
            metrics, forward_loss=forward_loss, backward_loss=backward_loss
        )
