"""The baseline the compiled decoders are measured against in decode.py: greedy decoding and beam
search as a Python `for` over one jitted step of the KV-cache model, its state donated so that it
is updated in place."""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.contracts import Head, Model, Params
from seqjax.data import BOS_ID
from seqjax.model_head import init_decode_state, make_step_fn

# The empty KV cache of `init_decode_state`, built by one compiled call rather than op by op.
empty_cache = jax.jit(init_decode_state, static_argnames=("model", "batch_size", "max_len"))


@functools.partial(jax.jit, static_argnames=("model", "head"), donate_argnames=("state",))
def greedy_step(model: Model, head: Head, params: Params, state: Any, tokens: jax.Array) -> tuple[jax.Array, Any]:
    """One greedy step: tokens [B] int32 -> (next tokens [B] int32, state)."""
    log_probs, state = make_step_fn(model, head, params)(state, tokens)
    return jnp.argmax(log_probs, axis=-1).astype(jnp.int32), state


def python_loop_greedy(model: Model, head: Head, params: Params, *, batch: int, max_len: int) -> jax.Array:
    """Greedy decoding of `batch` rows from BOS by a Python loop over `greedy_step`, in a cache of
    max_len + 1 slots: tokens [batch, max_len] int32."""
    state = empty_cache(model, params, batch_size=batch, max_len=max_len + 1)
    tokens = jnp.full((batch,), BOS_ID, jnp.int32)
    generated: list[jax.Array] = []
    for _ in range(max_len):
        tokens, state = greedy_step(model, head, params, state, tokens)
        generated.append(tokens)
    return jnp.stack(generated, axis=1)


@functools.partial(jax.jit, static_argnames=("model", "head"), donate_argnames=("beams", "sequences"))
def beam_step(
    model: Model,
    head: Head,
    params: Params,
    beams: Any,
    totals: jax.Array,
    sequences: jax.Array,
    last: jax.Array,
    t: jax.Array | np.integer,
) -> tuple[Any, jax.Array, jax.Array, jax.Array]:
    """One step of the live beams, ranked by total log-prob.

    Args:
      beams: the decode state with B * K rows (row b * K + k is beam k of row b).
      totals: [B, K] float32 log-prob sums; sequences: [B, K, max_len] int32;
      last: [B * K] int32 tokens to feed; t: [] int32 the step.
    Returns:
      (beams, totals, sequences, last) after extending by the K best of the K * V extensions.
    """
    batch_size, k = totals.shape
    log_probs, beams = make_step_fn(model, head, params)(beams, last)
    vocab = log_probs.shape[-1]
    extended = (totals[:, :, None] + log_probs.reshape(batch_size, k, vocab)).reshape(batch_size, k * vocab)
    totals, index = jax.lax.top_k(extended, k)
    parents, tokens = index // vocab, (index % vocab).astype(jnp.int32)
    sequences = jnp.take_along_axis(sequences, parents[:, :, None], axis=1).at[:, :, t].set(tokens)
    rows = (jnp.arange(batch_size)[:, None] * k + parents).reshape(-1)
    beams = jax.tree.map(lambda leaf: leaf[rows], beams)
    return beams, totals, sequences, tokens.reshape(-1)


def python_loop_beam(
    model: Model, head: Head, params: Params, *, batch: int, beam_size: int, max_len: int
) -> tuple[jax.Array, jax.Array]:
    """Beam search of `batch` rows from BOS by a Python loop over `beam_step`, in caches of
    max_len + 1 slots: sequences [B, K, max_len] int32, scores [B, K] float32.

    With EOS unreachable and no length penalty no hypothesis finishes before the last step, so
    the live beams at the end are `decoding.beam_search`'s result, best first.
    """
    b, k = batch, beam_size
    beams = empty_cache(model, params, batch_size=b * k, max_len=max_len + 1)
    totals = jnp.full((b, k), -jnp.inf, jnp.float32).at[:, 0].set(0.0)  # one live beam, no duplicates
    sequences = jnp.zeros((b, k, max_len), jnp.int32)
    last = jnp.full((b * k,), BOS_ID, jnp.int32)
    for t in range(max_len):
        beams, totals, sequences, last = beam_step(model, head, params, beams, totals, sequences, last, np.int32(t))
    return sequences, totals
