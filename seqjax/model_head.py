"""Where a model meets a head: the glue every objective, the train step and generation call.

Parameters are one pytree `{"model": ..., "head": ...}`; a batch is a `contracts.Batch`.
Nothing here knows a parameter path: a tied head gets the table the model names with its
`target_embedding` method.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from seqjax.contracts import Batch, Head, Model, Params, StepFn


def encoder_kwargs(batch: Batch | None) -> dict[str, jax.Array]:
    """The source-side keyword arguments of an encoder-decoder, empty for a language model."""
    if batch is None or "src" not in batch:
        return {}
    return {"src": batch["src"], "src_mask": batch["src_mask"] > 0}


PACKING_KEYS = ("segment_ids", "positions", "src_segment_ids", "src_positions")


def packing_kwargs(batch: Batch | None) -> dict[str, jax.Array]:
    """A packed batch's segment ids and per-segment positions [B, T] (and [B, S] for the
    source), which a Transformer's teacher-forced pass takes; empty for other batches."""
    if batch is None:
        return {}
    return {key: batch[key] for key in PACKING_KEYS if key in batch}


def tied_embedding(model: Model, head: Head, params: Params) -> jax.Array | None:
    """The model's target embedding table [V, D] float32 when the head ties to it, else None."""
    if not head.tied:
        return None
    result: jax.Array | None = model.apply({"params": params["model"]}, method="target_embedding")
    return result


def init_params(model: Model, head: Head, key: jax.Array, batch: Batch) -> dict[str, Any]:
    """Initializes `{"model": ..., "head": ...}` from one example batch's shapes: plain arrays."""
    params: dict[str, Any] = nn.meta.unbox(init_boxed_params(model, head, key, batch))
    return params


def init_boxed_params(model: Model, head: Head, key: jax.Array, batch: Batch) -> dict[str, Any]:
    """`init_params`'s parameters as `init` returns them: each an `nn.LogicallyPartitioned` box
    holding the array and its logical axes (what the train state is placed by)."""
    model_key, head_key, dropout_key = jax.random.split(key, 3)
    model_vars = model.init({"params": model_key, "dropout": dropout_key}, batch["inputs"], **encoder_kwargs(batch))
    hidden = model.apply(model_vars, batch["inputs"], **encoder_kwargs(batch))
    params = {"model": model_vars["params"]}
    targets = batch["targets"].reshape(-1)
    head_vars = head.init(
        {"params": head_key},
        hidden.reshape(-1, hidden.shape[-1]),
        targets,
        head_key,
        jnp.ones(targets.shape, jnp.float32),
        embedding=tied_embedding(model, head, params),
        method="loss",
    )
    return {**params, "head": head_vars["params"]}


def hidden_states(
    model: Model,
    params: Params,
    batch: Batch,
    key: jax.Array,
    *,
    train: bool,
    inputs: jax.Array | None = None,
    embedded: jax.Array | None = None,
) -> jax.Array:
    """Teacher-forced hidden states [B, T, D] float32 for `inputs` (default: the batch's)."""
    result: jax.Array = model.apply(
        {"params": params["model"]},
        batch["inputs"] if inputs is None else inputs,
        embedded=embedded,
        train=train,
        rngs={"dropout": key},
        **encoder_kwargs(batch),
        **packing_kwargs(batch),
    )
    return result


def head_loss(
    model: Model, head: Head, params: Params, hidden: jax.Array, batch: Batch, key: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The head's training loss (masked mean over tokens) for hidden [B, T, D]."""
    d = hidden.shape[-1]
    result: tuple[jax.Array, dict[str, jax.Array]] = head.apply(
        {"params": params["head"]},
        hidden.reshape(-1, d),
        batch["targets"].reshape(-1),
        key,
        batch["mask"].reshape(-1),
        embedding=tied_embedding(model, head, params),
        method="loss",
    )
    return result


def token_log_probs(model: Model, head: Head, params: Params, hidden: jax.Array) -> jax.Array:
    """The head's exact log-probabilities [..., V] float32 for hidden [..., D]."""
    d = hidden.shape[-1]
    log_probs = head.apply(
        {"params": params["head"]},
        hidden.reshape(-1, d),
        embedding=tied_embedding(model, head, params),
        method="log_probs",
    )
    result: jax.Array = log_probs.reshape(*hidden.shape[:-1], -1)
    return result


def token_nll(model: Model, head: Head, params: Params, hidden: jax.Array, targets: jax.Array) -> jax.Array:
    """Exact negative log-likelihood [B, T] float32 of targets [B, T] under the head's log-probs,
    from the head's `target_log_probs`: never the [B·T, V] matrix, so exact evaluation at a
    large vocabulary holds O(B·T × block) of scores."""
    d = hidden.shape[-1]
    log_probs = head.apply(
        {"params": params["head"]},
        hidden.reshape(-1, d),
        targets.reshape(-1),
        embedding=tied_embedding(model, head, params),
        method="target_log_probs",
    )
    result: jax.Array = -log_probs.reshape(targets.shape)
    return result


def embed_tokens(model: Model, params: Params, tokens: jax.Array) -> jax.Array:
    """The model's (target) embedding lookup [B, T, D] float32 of tokens [B, T] int32: what
    `hidden_states(..., embedded=...)` replaces."""
    result: jax.Array = model.apply({"params": params["model"]}, tokens, method="embed")
    return result


def init_decode_state(model: Model, params: Params, batch_size: int, max_len: int, batch: Batch | None = None) -> Any:
    """The decode state for `batch_size` rows with room for max_len steps, encoding the
    batch's source when the model has an encoder and conditioning on its "latent" z [B, Z]
    when the model has one; every leaf has B as its leading axis."""
    latent = {"latent": batch["latent"]} if batch is not None and "latent" in batch else {}
    return model.apply(
        {"params": params["model"]}, batch_size, max_len, method="init_decode_state", **encoder_kwargs(batch), **latent
    )


def decode_step(model: Model, params: Params, state: Any, token: jax.Array) -> tuple[jax.Array, Any]:
    """One step of the decode-step contract: token [B] int32 -> (hidden [B, D] float32, state)."""
    result: tuple[jax.Array, Any] = model.apply({"params": params["model"]}, state, token, method="decode_step")
    return result


def prefill(model: Model, params: Params, state: Any, prefix: jax.Array, lengths: jax.Array | None = None) -> Any:
    """Feeds prefix [B, P] int32 (P >= 0) through the decode step, returning the new state.

    lengths: None, or [B] int32 in [0, P]: row b reads only its first lengths[b] tokens, its
    state left as they made it (every leaf carries the batch as its leading axis, so each row's
    is kept per row), and the rest of its prefix is not read.
    """

    def feed(state: Any, column: tuple[jax.Array, jax.Array]) -> tuple[Any, None]:
        tokens, t = column
        _, fed = decode_step(model, params, state, tokens)
        if lengths is None:
            return fed, None
        reads = t < lengths
        return jax.tree.map(
            lambda new, old: jnp.where(reads.reshape(-1, *[1] * (new.ndim - 1)), new, old), fed, state
        ), None

    state, _ = jax.lax.scan(feed, state, (prefix.T, jnp.arange(prefix.shape[1])))
    return state


def make_step_fn(model: Model, head: Head, params: Params) -> StepFn:
    """step_fn(state, tokens [B] int32) -> (log_probs [B, V] float32, state): the decoders' contract."""
    embedding = tied_embedding(model, head, params)

    def step_fn(state: Any, tokens: jax.Array) -> tuple[jax.Array, Any]:
        hidden, state = decode_step(model, params, state, tokens)
        log_probs = head.apply({"params": params["head"]}, hidden, embedding=embedding, method="log_probs")
        return log_probs, state

    return step_fn
