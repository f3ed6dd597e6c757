"""How a batch flows through a model and a head; shared by every objective.

Parameters are one pytree `{"model": ..., "head": ...}`. A batch is a dict of arrays:
`inputs [B, T] int32`, `targets [B, T] int32`, `mask [B, T] float32`, and for
encoder-decoders also `src [B, S] int32`, `src_mask [B, S] float32`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import flax.linen as nn

Params = Any
Batch = dict[str, jax.Array]


def encoder_kwargs(batch: Batch) -> dict[str, jax.Array]:
    """The source-side keyword arguments of an encoder-decoder, empty for a language model."""
    if "src" not in batch:
        return {}
    return {"src": batch["src"], "src_mask": batch["src_mask"] > 0}


def tied_embedding(head: nn.Module, params: Params) -> jax.Array | None:
    """The model's target embedding table [V, D] float32 when the head ties to it, else None."""
    return params["model"]["embed"]["embedding"] if head.tied else None


def hidden_states(
    model: nn.Module,
    params: Params,
    batch: Batch,
    key: jax.Array,
    *,
    train: bool,
    inputs: jax.Array | None = None,
    embedded: jax.Array | None = None,
) -> jax.Array:
    """Teacher-forced hidden states [B, T, D] float32 for `inputs` (default: the batch's)."""
    return model.apply(
        {"params": params["model"]},
        batch["inputs"] if inputs is None else inputs,
        embedded=embedded,
        train=train,
        rngs={"dropout": key},
        **encoder_kwargs(batch),
    )


def head_loss(
    head: nn.Module, params: Params, hidden: jax.Array, batch: Batch, key: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The head's training loss (masked mean over tokens) for hidden [B, T, D]."""
    d = hidden.shape[-1]
    return head.apply(
        {"params": params["head"]},
        hidden.reshape(-1, d),
        batch["targets"].reshape(-1),
        key,
        batch["mask"].reshape(-1),
        embedding=tied_embedding(head, params),
        method="loss",
    )


def token_nll(head: nn.Module, params: Params, hidden: jax.Array, targets: jax.Array) -> jax.Array:
    """Exact negative log-likelihood [B, T] float32 of `targets` under the head's normalized log-probs."""
    d = hidden.shape[-1]
    log_probs = head.apply(
        {"params": params["head"]}, hidden.reshape(-1, d), embedding=tied_embedding(head, params), method="log_probs"
    )
    nll = -jnp.take_along_axis(log_probs, targets.reshape(-1, 1), axis=-1)[:, 0]
    return nll.reshape(targets.shape)


def embed_tokens(model: nn.Module, params: Params, tokens: jax.Array) -> jax.Array:
    """The model's (target) embedding lookup [B, T, D] float32 of tokens [B, T] int32: what
    `hidden_states(..., embedded=...)` replaces."""
    return model.apply({"params": params["model"]}, tokens, method="embed")


def token_log_probs(head: nn.Module, params: Params, hidden: jax.Array) -> jax.Array:
    """The head's exact log-probabilities [..., V] float32 for hidden [..., D]."""
    d = hidden.shape[-1]
    log_probs = head.apply(
        {"params": params["head"]}, hidden.reshape(-1, d), embedding=tied_embedding(head, params), method="log_probs"
    )
    return log_probs.reshape(*hidden.shape[:-1], -1)


def init_decode_state(model: nn.Module, params: Params, batch: Batch, max_len: int):
    """The decode state for the batch's rows (encoding the batch's source, if any), room for
    max_len steps; every leaf has the batch B as its leading axis."""
    batch_size = batch["inputs"].shape[0]
    return model.apply(
        {"params": params["model"]}, batch_size, max_len, method="init_decode_state", **encoder_kwargs(batch)
    )


def make_step_fn(model: nn.Module, head: nn.Module, params: Params):
    """step_fn(state, tokens [B] int32) -> (log_probs [B, V] float32, state): the decoders' contract."""
    embedding = tied_embedding(head, params)

    def step_fn(state, tokens):
        hidden, state = model.apply({"params": params["model"]}, state, tokens, method="decode_step")
        log_probs = head.apply({"params": params["head"]}, hidden, embedding=embedding, method="log_probs")
        return log_probs, state

    return step_fn
