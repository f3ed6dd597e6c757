"""A tiny exact language model for decoding tests: its log-probs are looked up by the whole prefix.

The decoding state imitates a KV cache: a per-row table of log-probs [B, C, V], a token
history [B, T] and a position vector [B]. The table row is chosen by the prefix code, the
prefix (BOS first) read as a base-(V + 1) number with digits token + 1, so every prefix
has its own next-token distribution and the decoders can be checked against enumeration.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest


def random_table(rng: np.random.Generator, batch: int, vocab: int, max_len: int, *, eos_id=None, eos_bias=0.0):
    """log-probs [B, (V + 1) ** max_len, V] float32, one distribution per prefix of up to max_len tokens."""
    logits = 2.0 * rng.standard_normal((batch, (vocab + 1) ** max_len, vocab))
    if eos_id is not None:
        logits[..., eos_id] += eos_bias
    return (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(np.float32)


def init_state(table, max_len: int):
    batch = table.shape[0]
    return {
        "table": jnp.asarray(table),
        "cache": (jnp.zeros((batch, max_len), jnp.int32), jnp.zeros((batch,), jnp.int32)),
    }


def step_fn(state, tokens):
    """(state, tokens [N] int32) -> (log_probs [N, V] float32, state)."""
    history, position = state["cache"]
    rows = jnp.arange(tokens.shape[0])
    history = history.at[rows, position].set(tokens)
    position = position + 1
    vocab = state["table"].shape[-1]
    index = jnp.arange(history.shape[1])
    powers = jnp.where(index < position[:, None], (vocab + 1) ** jnp.maximum(position[:, None] - 1 - index, 0), 0)
    code = jnp.sum((history + 1) * powers, axis=1)
    return state["table"][rows, code], dict(state, cache=(history, position))


def next_log_probs(table_row: np.ndarray, bos_id: int, prefix) -> np.ndarray:
    """table_row: [C, V]; the distribution after BOS followed by `prefix`: [V]."""
    vocab = table_row.shape[-1]
    code = 0
    for token in (bos_id, *prefix):
        code = code * (vocab + 1) + token + 1
    return table_row[code]


def sequence_log_prob(table_row: np.ndarray, bos_id: int, sequence) -> float:
    return float(sum(next_log_probs(table_row, bos_id, sequence[:t])[tok] for t, tok in enumerate(sequence)))


@pytest.fixture
def prefix_lm():
    return types.SimpleNamespace(
        random_table=random_table,
        init_state=init_state,
        step_fn=step_fn,
        next_log_probs=next_log_probs,
        sequence_log_prob=sequence_log_prob,
    )


@pytest.fixture
def count_steps():
    """Wraps a step function so that each call (inside any compiled loop) is counted on the host."""

    def wrap(step):
        calls = []

        def counted(state, tokens):
            jax.debug.callback(lambda: calls.append(1))
            return step(state, tokens)

        return counted, calls

    return wrap
