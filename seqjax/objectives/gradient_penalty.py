"""Embedding gradient penalty (Su 2020): the objective `GradientPenalty` and the gradient it
penalizes, `embedding_gradient`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from seqjax.checks import number
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import embed_tokens, head_loss, hidden_states


def embedding_gradient(
    model: Model, head: Head, params: Params, batch: Batch, key: jax.Array
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """(CE [] float32, ∂CE/∂e [B, T, D] float32, the head's aux), differentiable in `params`."""
    model_key, head_key = jax.random.split(key)

    def cross_entropy(embedded: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        hidden = hidden_states(model, params, batch, model_key, train=True, embedded=embedded)
        return head_loss(model, head, params, hidden, batch, head_key)

    (loss, metrics), grad = jax.value_and_grad(cross_entropy, has_aux=True)(
        embed_tokens(model, params, batch["inputs"])
    )
    return loss, grad, metrics


@dataclasses.dataclass(frozen=True)
class GradientPenaltyOptions(Options):
    """The weight of the embedding gradient penalty."""

    penalty: float = option(0.5, "λ of λ·||∂CE/∂(input embeddings)||²", check=number(0.0))


@dataclasses.dataclass(frozen=True)
class GradientPenalty(GradientPenaltyOptions, Objective):
    """Embedding gradient penalty (Su 2020): loss = CE + λ·‖∂CE/∂e‖², e the decoder input
    embeddings, λ = `penalty`.

    A flat loss around the gold input embeddings makes the model less sensitive to a wrong
    input token, a cheap stand-in for adversarial training on the embeddings. e is the
    [B, T, D] lookup the model would make (per position, as in Su's Keras script, which sums
    the squares of the per-lookup gradient slices); CE is the head's masked mean training
    loss. The penalty is differentiated through a nested `jax.grad`; λ does not change over
    training.
    """

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
        loss: [] float32, CE + λ·‖∂CE/∂e‖².
        metrics: dict of [] float32: the head's aux, "cross_entropy" and "grad_norm_sq"
          (‖∂CE/∂e‖²).
        """
        del step, ids  # λ does not change over training; only gold tokens are fed
        cross_entropy, grad, metrics = embedding_gradient(model, head, params, batch, key)
        squared_norm = jnp.sum(jnp.square(grad))
        return cross_entropy + self.penalty * squared_norm, dict(
            metrics, cross_entropy=cross_entropy, grad_norm_sq=squared_norm
        )


OBJECTIVES.register("gradient_penalty", GradientPenalty, options=GradientPenaltyOptions)
