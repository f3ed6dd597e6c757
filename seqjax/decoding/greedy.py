"""Greedy decoding: the most probable next token at every step, as one compiled loop."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from seqjax.contracts import StepFn
from seqjax.decoding.loop import decode_loop
from seqjax.decoding.validation import check_positive_int, check_step_contract, check_token_id


def greedy(
    step_fn: StepFn, state: Any, *, bos_id: int, eos_id: int, pad_id: int, max_len: int
) -> tuple[jax.Array, jax.Array]:
    """Greedy decoding of a batch.

    Args:
      step_fn: `(state, tokens [B] int32) -> (log_probs [B, V] float32, state)`; must be
        hashable (the compiled program is cached per step function).
      state: any pytree whose every leaf has the batch B as its leading axis.
      bos_id: the first token fed to every row (for an LM continuing a prompt, its last
        token, with the rest of the prompt already in `state`).
      eos_id: the token that ends a row.
      pad_id: the token that fills a row after its EOS.
      max_len: the number of decoding steps at most.

    Returns:
      tokens: [B, max_len] int32, generated tokens (BOS excluded), pad_id after EOS.
      lengths: [B] int32, tokens up to and including EOS; max_len for rows without EOS.

    Usable inside `jax.jit` (state traced, the keyword arguments static).

    Example:
      >>> import jax.numpy as jnp
      >>> from seqjax.decoding import greedy
      >>> table = jnp.log(jnp.array([[.25, .25, .25, .25], [.05, .05, .3, .6], [.25, .25, .25, .25], [.1, .1, .6, .2]]))
      >>> def step_fn(state, tokens):  # a bigram model: row t of the table follows token t
      ...     return table[tokens], state
      >>> tokens, lengths = greedy(step_fn, jnp.zeros(2), bos_id=1, eos_id=2, pad_id=0, max_len=4)
      >>> tokens.tolist(), lengths.tolist()
      ([[3, 2, 0, 0], [3, 2, 0, 0]], [2, 2])
    """
    max_len = check_positive_int("max_len", max_len)
    _, vocab_size = check_step_contract(step_fn, state, max_len)
    bos_id = check_token_id("bos_id", bos_id, vocab_size)
    eos_id = check_token_id("eos_id", eos_id, vocab_size)
    pad_id = check_token_id("pad_id", pad_id, vocab_size)
    result: tuple[jax.Array, jax.Array] = _greedy_program(
        step_fn, state, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, max_len=max_len
    )
    return result


def most_probable(log_probs: jax.Array) -> jax.Array:
    """[..., V] float -> [...] int32: `jnp.argmax` over the last axis (the first maximum, or the
    first NaN), as two plain reductions, which ran about twice as fast as argmax's (value,
    index) reduction on CPU ([32, 10000]: 0.30 against 0.55 ms).

    Example:
      >>> import jax.numpy as jnp
      >>> from seqjax.decoding import most_probable
      >>> most_probable(jnp.array([[-1.0, -0.5, -0.5], [-2.0, jnp.nan, 0.0]])).tolist()
      [1, 1]
    """
    vocab = jnp.arange(log_probs.shape[-1], dtype=jnp.int32)
    best = jnp.max(log_probs, axis=-1, keepdims=True)
    return jnp.min(jnp.where((log_probs == best) | jnp.isnan(log_probs), vocab, vocab.shape[0]), axis=-1)


@functools.partial(jax.jit, static_argnames=("step_fn", "bos_id", "eos_id", "pad_id", "max_len"))
def _greedy_program(
    step_fn: StepFn, state: Any, *, bos_id: int, eos_id: int, pad_id: int, max_len: int
) -> tuple[jax.Array, jax.Array]:
    return decode_loop(
        step_fn,
        state,
        lambda log_probs, t: most_probable(log_probs),
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        max_len=max_len,
    )
