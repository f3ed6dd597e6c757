"""Per-device memory of a run: the state's shards and the compiled step's own buffers.

Parameter and optimizer-state bytes are exact: the size of the shard each device holds
under the state's shardings. The step's temporaries (activations kept for the backward
pass, gradients, collective buffers) are what XLA allocated when it compiled the step for
one device of the mesh (`Compiled.memory_analysis`); backends that do not report them
(some CPU builds) give 0.
"""

from __future__ import annotations

import math
from typing import Any

import jax

from seqjax.training.core.state import TrainState


def per_device_bytes(tree: Any) -> int:
    """Bytes one device holds of `tree` (arrays or ShapeDtypeStructs carrying a sharding)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shard = leaf.sharding.shard_shape(leaf.shape)
        total += math.prod(shard) * leaf.dtype.itemsize
    return total


def memory_report(train_step: Any, state: TrainState, batch: dict[str, jax.ShapeDtypeStruct]) -> dict[str, int]:
    """Compiles `train_step` for (state, batch) and returns per-device bytes (`compiled_memory`)."""
    return compiled_memory(train_step.lower(state, batch).compile(), state, batch)


def compiled_memory(compiled: Any, state: TrainState, batch: dict[str, jax.ShapeDtypeStruct]) -> dict[str, int]:
    """Per-device bytes of a train step compiled for (state, batch).

    Returns:
      {"parameters", "optimizer_state", "batch", "step_temporaries", "peak_estimate"}:
      peak_estimate = arguments + outputs not aliased to donated arguments + temporaries.
    """
    stats = compiled.memory_analysis()
    temporaries = int(getattr(stats, "temp_size_in_bytes", 0) or 0)
    arguments = int(getattr(stats, "argument_size_in_bytes", 0) or 0)
    outputs = int(getattr(stats, "output_size_in_bytes", 0) or 0)
    aliased = int(getattr(stats, "alias_size_in_bytes", 0) or 0)
    return {
        "parameters": per_device_bytes(state.params),
        "optimizer_state": per_device_bytes(state.opt_state),
        "batch": per_device_bytes(batch),
        "step_temporaries": temporaries,
        "peak_estimate": arguments + outputs - aliased + temporaries,
    }


def format_bytes(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


def describe_memory(report: dict[str, int]) -> str:
    parts = ", ".join(f"{name.replace('_', ' ')} {format_bytes(value)}" for name, value in report.items())
    return f"per-device memory: {parts}"
