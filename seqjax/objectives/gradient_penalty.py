"""Embedding gradient penalty (Su 2020): loss + λ·‖∂CE/∂e‖², e the decoder input embeddings.

A flat loss around the gold input embeddings makes the model less sensitive to a wrong
input token, a cheap stand-in for adversarial training on the embeddings. e is the
[B, T, D] lookup the model would make (per position, as in Su's Keras script, which sums
the squares of the per-lookup gradient slices); CE is the head's masked mean training
loss. The penalty is differentiated through a nested `jax.grad`.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from seqjax.objectives.checks import check_number
from seqjax.contracts import Batch, Params, SpecialIds
from seqjax.model_head import embed_tokens, head_loss, hidden_states


def check_gradient_penalty(*, penalty: float) -> None:
    check_number("penalty", penalty, 0.0)


def embedding_gradient(
    model: nn.Module, head: nn.Module, params: Params, batch: Batch, key: jax.Array
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """(CE [] float32, ∂CE/∂e [B, T, D] float32, the head's aux), differentiable in `params`."""
    model_key, head_key = jax.random.split(key)

    def cross_entropy(embedded):
        hidden = hidden_states(model, params, batch, model_key, train=True, embedded=embedded)
        return head_loss(model, head, params, hidden, batch, head_key)

    (loss, metrics), grad = jax.value_and_grad(cross_entropy, has_aux=True)(
        embed_tokens(model, params, batch["inputs"])
    )
    return loss, grad, metrics


def gradient_penalty(
    model: nn.Module,
    head: nn.Module,
    params: Params,
    batch: Batch,
    key: jax.Array,
    step: jax.Array,
    *,
    ids: SpecialIds,
    penalty: float = 0.5,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Teacher forcing plus λ = `penalty` times the squared input-embedding gradient norm.

    Returns:
      loss: [] float32, CE + λ·‖∂CE/∂e‖².
      metrics: the head's aux, "cross_entropy" and "grad_norm_sq" (‖∂CE/∂e‖²).
    """
    del step  # λ does not change over training
    check_gradient_penalty(penalty=penalty)
    cross_entropy, grad, metrics = embedding_gradient(model, head, params, batch, key)
    squared_norm = jnp.sum(jnp.square(grad))
    return cross_entropy + penalty * squared_norm, dict(
        metrics, cross_entropy=cross_entropy, grad_norm_sq=squared_norm
    )
