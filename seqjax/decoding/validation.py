"""Host-side checks shared by the decoders: arguments, and the step function's contract.

The decoders read the batch size from the state and the vocabulary size from one
abstract evaluation of the step function (`jax.eval_shape`, no computation), so that
token ids and cutoffs are checked against V before the decoding loop is traced.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from seqjax.decoding.phases import check_capacity


def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive_int(name: str, value: Any) -> int:
    if not is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def check_token_id(name: str, value: Any, vocab_size: int) -> int:
    if not is_int(value) or not 0 <= value < vocab_size:
        raise ValueError(f"{name} must be an int in [0, vocab_size={vocab_size}), got {value!r}")
    return int(value)


def check_row_keys(keys: Any, batch_size: int) -> None:
    """`keys` must be one `jax.random` key per row: typed keys [B], or legacy uint32 keys [B, 2]."""
    shape, dtype = jnp.shape(keys), getattr(keys, "dtype", None)
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    if shape != ((batch_size,) if typed else (batch_size, 2)) or not (typed or dtype == jnp.uint32):
        raise ValueError(
            f"keys must be one jax.random key per row: [B={batch_size}] typed keys or uint32 [B, 2], "
            f"got shape {shape} dtype {dtype}"
        )


def check_step_contract(step_fn: Callable, state: Any, max_len: int) -> tuple[int, int]:
    """Checks `step_fn(state, tokens [B] int32) -> (log_probs [B, V] float, state)`.

    The returned state must have the input state's structure, shapes and dtypes (it is a
    loop carry), every leaf must have the batch as its leading axis, and the state's
    `GrowsWithSteps` parts must hold at least max_len positions.

    Returns:
      (B, V): the batch size and the vocabulary size.
    """
    leaves = jax.tree.leaves(state)
    if not leaves:
        raise ValueError(
            "state must have at least one array leaf (the decoders read the batch size from it), got an empty pytree"
        )
    leading = {jnp.shape(leaf)[0] if jnp.ndim(leaf) else None for leaf in leaves}
    if len(leading) != 1 or None in leading:
        raise ValueError(
            f"every state leaf must have the batch as its leading axis, got leading sizes {sorted(leading, key=str)}"
        )
    (batch_size,) = {size for size in leading if size is not None}
    if batch_size == 0:
        raise ValueError("the batch size (leading axis of the state) must be positive, got 0")
    check_capacity(state, max_len)
    tokens = jax.ShapeDtypeStruct((batch_size,), jnp.int32)
    log_probs, new_state = jax.eval_shape(step_fn, state, tokens)
    if len(log_probs.shape) != 2 or log_probs.shape[0] != batch_size or log_probs.shape[1] == 0:
        raise ValueError(f"step_fn must return log_probs of shape [B={batch_size}, V>0], got {log_probs.shape}")
    if not jnp.issubdtype(log_probs.dtype, jnp.floating):
        raise ValueError(f"step_fn must return floating log_probs, got {log_probs.dtype}")
    expected = jax.eval_shape(lambda s: s, state)
    if str(jax.tree.structure(new_state)) != str(jax.tree.structure(expected)) or any(
        (a.shape, a.dtype) != (b.shape, b.dtype) for a, b in zip(jax.tree.leaves(new_state), jax.tree.leaves(expected))
    ):
        raise ValueError(
            "step_fn must return a state with the input state's structure, shapes and dtypes, "
            f"got {new_state} for input {expected}"
        )
    return int(batch_size), int(log_probs.shape[1])
