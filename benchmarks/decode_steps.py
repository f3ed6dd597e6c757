"""The model's decode step as decode.py times it: with its KV cache, without one (re-running the
causal model on a prefix buffer), and many steps in one compiled loop that all write one
position."""

import functools
from typing import Any

import jax
import jax.numpy as jnp

from seqjax.contracts import Head, Model, Params, StepFn
from seqjax.model_head import tied_embedding


def empty_prefix(batch_size: int, length: int) -> dict[str, jax.Array]:
    """Recomputing state: prefix [B, length] int32 of written tokens, positions [B] int32 (next slot)."""
    return {"prefix": jnp.zeros((batch_size, length), jnp.int32), "positions": jnp.zeros((batch_size,), jnp.int32)}


def recomputing_decode_step(
    model: Model, model_params: Params, state: dict[str, jax.Array], tokens: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The decode-step contract without a cache: (state, tokens [B] int32) -> (hidden [B, D] float32, state).

    Writes each row's token at its position and re-runs the causal model on the whole prefix
    buffer; the slots after a row's position are zeros that causality keeps out of its hidden.
    """
    rows = jnp.arange(tokens.shape[0])
    positions = state["positions"]
    prefix = state["prefix"].at[rows, positions].set(tokens)
    hidden: jax.Array = model.apply({"params": model_params}, prefix)[rows, positions]
    return hidden, {"prefix": prefix, "positions": positions + 1}


def cached_decode_step(model: Model, model_params: Params, state: Any, tokens: jax.Array) -> tuple[jax.Array, Any]:
    """The model's own KV-cache step: (state, tokens [B] int32) -> (hidden [B, D] float32, state)."""
    step: tuple[jax.Array, Any] = model.apply({"params": model_params}, state, tokens, method="decode_step")
    return step


def recomputing_step_fn(model: Model, head: Head, params: Params) -> StepFn:
    """step_fn(state, tokens [B] int32) -> (log_probs [B, V] float32, state), state from `empty_prefix`."""
    embedding = tied_embedding(model, head, params)

    def step_fn(state: dict[str, jax.Array], tokens: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        hidden, state = recomputing_decode_step(model, params["model"], state, tokens)
        log_probs: jax.Array = head.apply({"params": params["head"]}, hidden, embedding=embedding, method="log_probs")
        return log_probs, state

    return step_fn


@functools.partial(jax.jit, static_argnames=("model", "recompute", "steps"))
def model_steps_at_position(
    model: Model, model_params: Params, state: Any, tokens: jax.Array, *, recompute: bool, steps: int
) -> jax.Array:
    """`steps` model steps that all write the position `state["positions"]` holds: summed hidden [B, D].

    The positions are reset before every step so that each one costs what a step at that
    position costs; the hidden states are summed so that no step's computation is dropped.
    """
    decode_step = recomputing_decode_step if recompute else cached_decode_step
    positions = state["positions"]

    def step(_: jax.Array, carry: tuple[jax.Array, Any]) -> tuple[jax.Array, Any]:
        total, state = carry
        hidden, state = decode_step(model, model_params, dict(state, positions=positions), tokens)
        return total + hidden, state

    hidden = jax.eval_shape(functools.partial(decode_step, model, model_params), state, tokens)[0]  # [B, D]
    summed: jax.Array = jax.lax.fori_loop(0, steps, step, (jnp.zeros(hidden.shape, jnp.float32), state))[0]
    return summed
