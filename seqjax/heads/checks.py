"""Host-side validation shared by the head functions: one clear ValueError per bad input.

JAX clamps out-of-range gather indices silently, so ids are checked on the host whenever
they are concrete; under `jit` they are tracers and only their shapes can be checked, the
values being the caller's responsibility (docs/design.md: "host validates, device computes").
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.typing import ArrayLike


def is_concrete(value: object) -> bool:
    """True when `value` holds data the host can read (not a tracer inside jit/grad/vmap)."""
    return not isinstance(value, jax.core.Tracer)


def require_rank(name: str, value: ArrayLike, rank: int) -> None:
    if np.ndim(value) != rank:
        raise ValueError(f"{name} must have rank {rank}, got shape {np.shape(value)}")


def require_ids(name: str, ids: ArrayLike, vocab_size: int) -> None:
    """Checks that integer `ids` lie in [0, vocab_size) when they are concrete."""
    dtype = ids.dtype if isinstance(ids, jax.core.Tracer) else np.asarray(ids).dtype
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f"{name} must be integer ids, got dtype {dtype}")
    if is_concrete(ids) and np.size(ids):
        values = np.asarray(ids)
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(f"{name} must lie in [0, {vocab_size}), got values in [{low}, {high}]")


def require_counts(name: str, counts: ArrayLike, vocab_size: int | None = None) -> np.ndarray:
    """Checks a 1-D vector of strictly positive counts; returns it as float64 numpy."""
    values = np.asarray(counts)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D vector, got shape {values.shape}")
    if vocab_size is not None and values.size != vocab_size:
        raise ValueError(f"{name} must have vocab_size={vocab_size} entries, got {values.size}")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        bad = values[~(np.isfinite(values) & (values > 0))][:5]
        raise ValueError(f"{name} must be finite and > 0 (smooth zero counts, e.g. counts + 1), got {bad}")
    return values.astype(np.float64)


def require_cutoffs(name: str, cutoffs: Sequence[int], vocab_size: int) -> tuple[int, ...]:
    """Cutoffs of an adaptive softmax: increasing ints in (0, vocab_size), at least one."""
    values = tuple(cutoffs)
    if (
        not values
        or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) for c in values)
        or any(b <= a for a, b in zip(values, values[1:]))
        or values[0] <= 0
        or values[-1] >= vocab_size
    ):
        raise ValueError(f"{name} must be increasing ints in (0, vocab_size={vocab_size}), at least one, got {values}")
    return tuple(int(c) for c in values)


def require_hidden_and_targets(hidden: ArrayLike, targets: ArrayLike, vocab_size: int) -> None:
    """`hidden: [N, D]` float and `targets: [N]` int ids in [0, vocab_size)."""
    require_rank("hidden", hidden, 2)
    require_rank("targets", targets, 1)
    if np.shape(targets)[0] != np.shape(hidden)[0]:
        raise ValueError(
            f"targets must have one id per hidden row ({np.shape(hidden)[0]}), got shape {np.shape(targets)}"
        )
    require_ids("targets", targets, vocab_size)


def require_output_layer(
    hidden: ArrayLike, weights: ArrayLike, biases: ArrayLike | None, targets: ArrayLike
) -> tuple[int, int]:
    """`hidden: [N, D]`, `weights: [V, D]`, `biases: [V]` or None, `targets: [N]` in [0, V).

    Returns (V, D).
    """
    require_rank("weights", weights, 2)
    vocab_size, features = np.shape(weights)
    require_hidden_and_targets(hidden, targets, vocab_size)
    require_table("hidden", hidden, None, features)
    require_vector("biases", biases, vocab_size)
    return vocab_size, features


def require_table(name: str, table: ArrayLike, rows: int | None, features: int) -> None:
    """A parameter table `[rows, features]` (rows None: any)."""
    require_rank(name, table, 2)
    shape = np.shape(table)
    if (rows is not None and shape[0] != rows) or shape[1] != features:
        expected = f"[{rows if rows is not None else 'any'}, {features}]"
        raise ValueError(f"{name} must have shape {expected}, got {shape}")


def require_vector(name: str, vector: ArrayLike | None, size: int) -> None:
    if vector is not None and np.shape(vector) != (size,):
        raise ValueError(f"{name} must have shape [{size}] or be None, got {np.shape(vector)}")
