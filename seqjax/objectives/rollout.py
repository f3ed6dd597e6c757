"""Running a model on a mix of gold and its own tokens: one `lax.scan` over the decode step.

At step t every row feeds either its gold decoder input or the token the model chose at
step t − 1, then chooses the next token from the head's exact distribution. This is
sequential scheduled sampling (Bengio et al. 2015) and, with a gold prefix followed by
model tokens, the rollouts of MIXER and REINFORCE. It works for any model with the
decode-step contract; the decode step is the inference path, so it runs without dropout.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp

from seqjax.checks import check_one_of
from seqjax.contracts import Batch, Head, Model, Params
from seqjax.decoding import most_probable
from seqjax.model_head import decode_step, init_decode_state, token_log_probs

Feed = Literal["argmax", "sample"]  # the model's own token in a rollout
FEEDS = typing.get_args(Feed)

Select = Callable[[jax.Array, jax.Array], jax.Array]


def choose(feed: str) -> Select:
    """select(log_probs [B, V] float32, key) -> [B] int32: the most probable token, or a draw."""
    check_one_of("feed", feed, FEEDS)
    if feed == "argmax":
        return lambda log_probs, key: most_probable(log_probs)
    return lambda log_probs, key: jax.random.categorical(key, log_probs, axis=-1).astype(jnp.int32)


def choose_per_row(greedy: jax.Array) -> Select:
    """A select that takes the most probable token in the rows where greedy [B] bool, else draws."""

    def select(log_probs: jax.Array, key: jax.Array) -> jax.Array:
        drawn = jax.random.categorical(key, log_probs, axis=-1)
        return jnp.where(greedy, most_probable(log_probs), drawn).astype(jnp.int32)

    return select


def rollout(
    model: Model, head: Head, params: Params, batch: Batch, gold: jax.Array, key: jax.Array, select: Select
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Feeds gold or model tokens, one step at a time.

    Args:
      batch: its `inputs [B, T] int32` are the gold decoder inputs (and `src`, `src_mask`
        the source of an encoder-decoder).
      gold: [B, T] bool, True where step t feeds `inputs[:, t]`; step 0 always feeds it.
      key: step t's choice gets `fold_in(key, t)`.
      select: how the model chooses its token, `choose(feed)` or `choose_per_row(greedy)`.

    Returns:
      hidden: [B, T] + [D] float32, the decoder states (differentiable in `params`).
      fed: [B, T] int32, the tokens fed at each step.
      chosen: [B, T] int32, the model's choice at each step (the token it would feed next).
    """
    inputs = batch["inputs"]
    state = init_decode_state(model, params, inputs.shape[0], inputs.shape[1], batch)
    # Choosing needs only the values: no gradient flows through an argmax or a draw.
    frozen = jax.lax.stop_gradient(params)

    def step(
        carry: tuple[Any, jax.Array], xs: tuple[jax.Array, jax.Array, jax.Array]
    ) -> tuple[tuple[Any, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
        state, previous = carry
        t, gold_t, inputs_t = xs
        token = jnp.where(gold_t | (t == 0), inputs_t, previous)
        hidden, state = decode_step(model, params, state, token)
        log_probs = token_log_probs(model, head, frozen, jax.lax.stop_gradient(hidden))
        chosen = select(log_probs, jax.random.fold_in(key, t))
        return (state, chosen), (hidden, token, chosen)

    xs = (jnp.arange(inputs.shape[1], dtype=jnp.int32), gold.T, inputs.T)
    _, (hidden, fed, chosen) = jax.lax.scan(step, (state, inputs[:, 0]), xs)
    return jnp.swapaxes(hidden, 0, 1), fed.T, chosen.T
