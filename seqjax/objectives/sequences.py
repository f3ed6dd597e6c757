"""Whole sequences for the sequence-level objectives: candidates, their lengths, their
sentence-BLEU rewards and their log-probabilities under the model.

A candidate is a row of tokens [T] that predicts the batch row's targets: position t holds
the token that follows the decoder inputs' start token and the candidate's positions
< t. Its length counts tokens up to and including its first EOS (T without one).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from seqjax.contracts import Batch, Head, Model, Params, SpecialIds, StepFn
from seqjax.metrics import sentence_bleu_ids
from seqjax.model_head import hidden_states, token_log_probs


def repeat_rows(batch: Batch, times: int) -> Batch:
    """Each row `times` times in a row: row b·times + k of the result is row b. [B, ...] -> [B·times, ...]."""
    result: Batch = jax.tree.map(lambda x: jnp.repeat(x, times, axis=0), batch)
    return result


def valid_rows(batch: Batch) -> jax.Array:
    """[B] float32: 1 for rows with a target token, 0 for the batchers' empty filler rows."""
    return (batch["mask"].sum(axis=1) > 0).astype(jnp.float32)


def lengths_after(tokens: jax.Array, start: jax.Array | int = 0, *, ids: SpecialIds) -> jax.Array:
    """[N] int32: 1 + the position of the first `ids.eos` at or after `start` ([N] or scalar), else T."""
    positions = jnp.arange(tokens.shape[1])
    is_end = (tokens == ids.eos) & (positions >= jnp.asarray(start)[..., None])
    return jnp.where(is_end.any(axis=1), jnp.argmax(is_end, axis=1) + 1, tokens.shape[1]).astype(jnp.int32)


def truncate(tokens: jax.Array, lengths: jax.Array, *, ids: SpecialIds) -> jax.Array:
    """tokens [N, T] with `ids.pad` after each row's length, so that equal candidates compare equal."""
    return jnp.where(jnp.arange(tokens.shape[1]) < lengths[:, None], tokens, ids.pad)


def _without_final_eos(tokens: jax.Array, lengths: jax.Array, eos_id: int) -> jax.Array:
    last = jnp.take_along_axis(tokens, jnp.maximum(lengths - 1, 0)[:, None], axis=1)[:, 0]
    return jnp.maximum(lengths - ((lengths > 0) & (last == eos_id)), 0).astype(jnp.int32)


def bleu_rewards(tokens: jax.Array, lengths: jax.Array, batch: Batch, *, ids: SpecialIds) -> jax.Array:
    """Sentence BLEU / 100 in [0, 1] of candidates [N, T] (lengths [N]) against the batch's
    targets [N, T]; the final EOS of either side is not a word."""
    reference_lengths = batch["mask"].sum(axis=1).astype(jnp.int32)
    bleu = sentence_bleu_ids(
        tokens,
        _without_final_eos(tokens, lengths, ids.eos),
        batch["targets"],
        _without_final_eos(batch["targets"], reference_lengths, ids.eos),
    )
    return bleu / 100.0


def candidate_log_probs(model: Model, head: Head, params: Params, batch: Batch, tokens: jax.Array) -> jax.Array:
    """Per-position log-probabilities [N, T] float32 of candidates tokens [N, T] given the
    batch rows' start tokens (and sources), teacher-forced and without dropout, so that they
    score the distribution the candidates were drawn from. Differentiable in `params`."""
    inputs = jnp.concatenate([batch["inputs"][:, :1], tokens[:, :-1]], axis=1)
    hidden = hidden_states(model, params, batch, jax.random.key(0), train=False, inputs=inputs)
    log_probs = token_log_probs(model, head, params, hidden)
    return jnp.take_along_axis(log_probs, tokens[..., None], axis=-1)[..., 0]


def start_step_fn(step_fn: StepFn) -> StepFn:
    """Wraps a decoders' step function so that each row's first fed token is its own start
    token; the state becomes {"decoder": state, "start": [B] int32, "started": [B] bool}
    (see `start_state`), whose every leaf keeps the batch as its leading axis."""

    def wrapped(state: dict[str, Any], tokens: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
        tokens = jnp.where(state["started"], tokens, state["start"])
        log_probs, decoder = step_fn(state["decoder"], tokens)
        return log_probs, {"decoder": decoder, "start": state["start"], "started": jnp.ones_like(state["started"])}

    return wrapped


def start_state(decoder_state: Any, start: jax.Array) -> dict[str, Any]:
    """The `start_step_fn` state for a decoder state and start tokens [B] int32."""
    return {"decoder": decoder_state, "start": start, "started": jnp.zeros(start.shape, bool)}
