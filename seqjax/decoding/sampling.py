"""Ancestral sampling with temperature, top-k and top-p (nucleus) truncation.

The truncations are small pure functions on log-probabilities, applied in the order
temperature -> top-k -> top-p (as in most toolkits): top-p's mass is measured on the
tempered, top-k-truncated distribution. Each returns normalized log-probs with -inf
outside the kept set, so sampling draws from the truncated, renormalized distribution.

Every row draws with a key of its own, so a row's sample depends on its key and its
distributions alone: not on the batch it is decoded in, its place there, or the other rows.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from seqjax.contracts import StepFn
from seqjax.decoding.loop import decode_loop
from seqjax.decoding.top_k import top_k
from seqjax.decoding.validation import (
    check_positive_int,
    check_row_keys,
    check_step_contract,
    check_token_id,
    is_int,
    is_real,
)


def scale_temperature(log_probs: ArrayLike, temperature: float | ArrayLike) -> jax.Array:
    """log softmax(log_probs / temperature). log_probs: [N, V] float; returns [N, V] float32.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.decoding import scale_temperature
      >>> cooled = scale_temperature(jnp.log(jnp.array([[0.5, 0.25, 0.25]])), 0.5)  # p² renormalized
      >>> print(np.asarray(jnp.exp(cooled)).round(4))
      [[0.6667 0.1667 0.1667]]
    """
    return jax.nn.log_softmax(jnp.asarray(log_probs, jnp.float32) / temperature, axis=-1)


def truncate_top_k(log_probs: ArrayLike, k: int) -> jax.Array:
    """Keeps exactly the k most probable tokens (ties: lower id first), renormalized.

    log_probs: [N, V] float; k: static int in [1, V]. Returns [N, V] float32.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.decoding import truncate_top_k
      >>> kept = truncate_top_k(jnp.log(jnp.array([[0.5, 0.2, 0.3]])), 2)
      >>> print(np.asarray(jnp.exp(kept)).round(4))
      [[0.625 0.    0.375]]
    """
    log_probs = jnp.asarray(log_probs, jnp.float32)
    _, kept = top_k(log_probs, k)
    rows = jnp.arange(log_probs.shape[0])[:, None]
    keep = jnp.zeros(log_probs.shape, bool).at[rows, kept].set(True)
    return jax.nn.log_softmax(jnp.where(keep, log_probs, -jnp.inf), axis=-1)


def truncate_top_p(log_probs: ArrayLike, p: float | ArrayLike) -> jax.Array:
    """Keeps the smallest set of most probable tokens whose probability reaches p, renormalized.

    A token is kept when the probability of the tokens ranked above it is < p, so the
    most probable token is always kept. log_probs: [N, V] float; p in (0, 1].
    Returns [N, V] float32.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.decoding import truncate_top_p
      >>> kept = truncate_top_p(jnp.log(jnp.array([[0.2, 0.5, 0.3]])), 0.6)  # 0.5 < 0.6, then 0.5 + 0.3
      >>> print(np.asarray(jnp.exp(kept)).round(4))
      [[0.    0.625 0.375]]
    """
    log_probs = jax.nn.log_softmax(jnp.asarray(log_probs, jnp.float32), axis=-1)
    order = jnp.argsort(-log_probs, axis=-1, stable=True)
    sorted_probs = jnp.exp(jnp.take_along_axis(log_probs, order, axis=-1))
    # Exclusive cumulative sum: the mass strictly above each rank, exact 0 for the first.
    mass_above = jnp.cumsum(sorted_probs, axis=-1) - sorted_probs
    mass_above = mass_above.at[:, 0].set(0.0)
    rows = jnp.arange(log_probs.shape[0])[:, None]
    keep = jnp.zeros(log_probs.shape, bool).at[rows, order].set(mass_above < p)
    return jax.nn.log_softmax(jnp.where(keep, log_probs, -jnp.inf), axis=-1)


def sample(
    step_fn: StepFn,
    state: Any,
    keys: jax.Array,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    max_len: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Samples one continuation per row from the (tempered, truncated) model distribution.

    Args:
      step_fn: `(state, tokens [B] int32) -> (log_probs [B, V] float32, state)`; hashable.
      state: any pytree whose every leaf has the batch B as its leading axis.
      keys: [B] `jax.random` keys (`jax.random.key`'s, or legacy uint32 [B, 2]), one per
        row: row b draws step t with `fold_in(keys[b], t)`.
      bos_id, eos_id, pad_id, max_len: as in `greedy`.
      temperature: > 0; divides the log-probs before the truncations.
      top_k: None (no truncation) or an int in [1, V].
      top_p: None (no truncation) or a float in (0, 1].

    Returns:
      tokens: [B, max_len] int32, generated tokens (BOS excluded), pad_id after EOS.
      lengths: [B] int32, tokens up to and including EOS; max_len for rows without EOS.

    Usable inside `jax.jit` (state and keys traced, the keyword arguments static).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from seqjax.decoding import sample
      >>> table = jnp.log(jnp.array([[.25, .25, .25, .25], [.05, .05, .3, .6], [.25, .25, .25, .25], [.1, .1, .6, .2]]))
      >>> def step_fn(state, tokens):  # a bigram model: row t of the table follows token t
      ...     return table[tokens], state
      >>> keys = jax.random.split(jax.random.key(0), 3)  # one per row
      >>> tokens, lengths = sample(step_fn, jnp.zeros(3), keys, bos_id=1, eos_id=2, pad_id=0,
      ...                          max_len=4, temperature=0.8, top_p=0.5)  # keeps the most probable only
      >>> tokens.tolist(), lengths.tolist()
      ([[3, 2, 0, 0], [3, 2, 0, 0], [3, 2, 0, 0]], [2, 2, 2])
    """
    max_len = check_positive_int("max_len", max_len)
    if not is_real(temperature) or not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if top_p is not None and (not is_real(top_p) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")
    batch_size, vocab_size = check_step_contract(step_fn, state, max_len)
    check_row_keys(keys, batch_size)
    bos_id = check_token_id("bos_id", bos_id, vocab_size)
    eos_id = check_token_id("eos_id", eos_id, vocab_size)
    pad_id = check_token_id("pad_id", pad_id, vocab_size)
    if top_k is not None and (not is_int(top_k) or not 1 <= top_k <= vocab_size):
        raise ValueError(f"top_k must be None or an int in [1, vocab_size={vocab_size}], got {top_k!r}")
    result: tuple[jax.Array, jax.Array] = _sample_program(
        step_fn,
        state,
        keys,
        jnp.float32(temperature),
        jnp.float32(1.0 if top_p is None else top_p),
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        max_len=max_len,
        top_k=None if top_k is None else int(top_k),
        use_top_p=top_p is not None,
    )
    return result


@functools.partial(jax.jit, static_argnames=("step_fn", "bos_id", "eos_id", "pad_id", "max_len", "top_k", "use_top_p"))
def _sample_program(
    step_fn: StepFn,
    state: Any,
    keys: jax.Array,
    temperature: jax.Array,
    top_p: jax.Array,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    max_len: int,
    top_k: int | None,
    use_top_p: bool,
) -> tuple[jax.Array, jax.Array]:
    def draw(log_probs: jax.Array, t: jax.Array) -> jax.Array:
        log_probs = scale_temperature(log_probs, temperature)
        if top_k is not None:
            log_probs = truncate_top_k(log_probs, top_k)
        if use_top_p:
            log_probs = truncate_top_p(log_probs, top_p)
        step_keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, t)
        return jax.vmap(jax.random.categorical)(step_keys, log_probs)

    return decode_loop(step_fn, state, draw, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, max_len=max_len)
