"""The one-token-at-a-time decoding loop shared by greedy decoding and sampling.

A `lax.while_loop` (one per phase over a growing KV cache: `seqjax.decoding.phases`) that
feeds each row its previous token, asks `select` for the next one, and stops as soon as every
row has emitted EOS (or after `max_len` steps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from seqjax.decoding.phases import phased_while_loop, state_capacity

# t [] int32, tokens [B, max_len] int32, lengths [B] int32, finished [B] bool, the last tokens
# [B] int32, and the step function's state.
_Carry = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, Any]


def decode_loop(
    step_fn: Callable,
    state: Any,
    select: Callable[[jax.Array, jax.Array], jax.Array],
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    max_len: int,
) -> tuple[jax.Array, jax.Array]:
    """Runs `select(log_probs [B, V] float32, t [] int32) -> tokens [B] int32` until all rows end.

    Returns:
      tokens: [B, max_len] int32, the generated tokens (BOS excluded), pad_id after EOS.
      lengths: [B] int32, tokens up to and including EOS; max_len for rows without EOS.
    """
    batch_size = jax.tree.leaves(state)[0].shape[0]

    def keep_going(carry: _Carry) -> jax.Array:
        t, _, _, finished, _, _ = carry
        return (t < max_len) & ~jnp.all(finished)

    def step(carry: _Carry) -> _Carry:
        t, tokens, lengths, finished, previous, state = carry
        log_probs, state = step_fn(state, previous)
        chosen = select(log_probs.astype(jnp.float32), t).astype(jnp.int32)
        chosen = jnp.where(finished, pad_id, chosen)
        tokens = tokens.at[:, t].set(chosen)
        lengths = jnp.where(finished, lengths, t + 1)
        finished = finished | (chosen == eos_id)
        return t + 1, tokens, lengths, finished, chosen, state

    carry = (
        jnp.int32(0),
        jnp.full((batch_size, max_len), pad_id, jnp.int32),
        jnp.zeros((batch_size,), jnp.int32),
        jnp.zeros((batch_size,), bool),
        jnp.full((batch_size,), bos_id, jnp.int32),
        state,
    )
    capacity = state_capacity(state)
    _, tokens, lengths, _, _, _ = phased_while_loop(keep_going, step, carry, capacity=capacity, max_len=max_len)
    return tokens, lengths
