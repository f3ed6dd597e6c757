"""Whether a run's training state fits a device, answered from shapes before compiling.

Every train step holds, per device, its shard of the parameters and of the optimizer state,
and the gradients, which the step makes with the parameters' layout (all-reduced whole under
data parallelism, reduce-scattered to shards under FSDP). Those bytes follow from the abstract
state's shapes and shardings alone (`jax.eval_shape`, no compile), and are a floor under the
compiled step's peak: where they exceed the device's usable memory nothing can fit, and
`seqjax compile` says so at once instead of after compiling. It then says what would bring
them under, with the bytes each gives: another sharding strategy on the same mesh, or a larger
data axis under FSDP (a larger target). model.scan_layers and model.remat shrink the step's
activations, not these bytes, so they are named as not helping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jax.sharding import AbstractMesh, Mesh

from seqjax.training.core.layout import AXES
from seqjax.training.core.memory import format_bytes, per_device_bytes
from seqjax.training.core.state import TrainState

LARGEST_DATA_AXIS = 1 << 16  # the data-axis sizes tried for FSDP: doubling up to this many

# The run's abstract state under a mesh (an abstract one serves: only its axis sizes decide the
# shards' shapes) and a strategy: `abstract_run`'s "placer".
Placer = Callable[[Mesh | AbstractMesh, str], TrainState]


def state_bytes(state: TrainState) -> dict[str, int]:
    """Per-device bytes of a state of ShapeDtypeStructs carrying shardings: {"parameters",
    "optimizer_state", "gradients" (the parameters' layout), "total"}."""
    parameters, optimizer = per_device_bytes(state.params), per_device_bytes(state.opt_state)
    return {
        "parameters": parameters,
        "optimizer_state": optimizer,
        "gradients": parameters,
        "total": 2 * parameters + optimizer,
    }


def remedies(placer: Placer, mesh: Mesh, strategy: str, usable: int) -> list[str]:
    """What brings the state's per-device bytes under `usable`, each with the bytes it gives,
    for the run's state (`placer`) that does not fit under `strategy` on `mesh`."""
    # The strategies of this mesh's axes: the data axis alone, or with the model axis; FSDP last.
    strategies = ("data", "fsdp") if mesh.shape["model"] == 1 else ("tensor", "fsdp_tensor")
    found = []
    for other in strategies:
        if other != strategy:
            total = state_bytes(placer(mesh, other))["total"]
            verdict = "fits" if total <= usable else "still over"
            found.append(f"train.sharding={other} on this mesh: {format_bytes(total)} per device ({verdict})")
    if state_bytes(placer(mesh, strategies[1]))["total"] > usable:
        found.append(larger_mesh(placer, mesh, strategies[1], usable))
    found.append("model.scan_layers and model.remat shrink the step's activations, not these bytes: they do not help")
    return found


def larger_mesh(placer: Placer, mesh: Mesh, fsdp: str, usable: int) -> str:
    """The smallest data axis (doubling this mesh's) on which `fsdp` brings the state under `usable`."""
    sizes = dict(mesh.shape)
    while sizes["data"] < LARGEST_DATA_AXIS:
        sizes["data"] *= 2
        total = state_bytes(placer(AbstractMesh(tuple(sizes[a] for a in AXES), AXES), fsdp))["total"]
        if total <= usable:
            axes = ",".join(f"{a}:{n}" for a, n in sizes.items() if n > 1 or a == "data")
            devices = sizes["slice"] * sizes["data"] * sizes["model"]
            return f"train.sharding={fsdp} on {devices} devices (train.mesh {axes}): {format_bytes(total)} per device"
    return f"train.sharding={fsdp} on no data axis up to {LARGEST_DATA_AXIS}: the state is over even then"


def state_fit_report(
    state: TrainState, placer: Placer, mesh: Mesh, strategy: str, usable: int
) -> dict[str, Any] | None:
    """None when the bytes per device of `state` (the run's, placed under `strategy` on `mesh`)
    fit `usable`; else the report keys that say it does not and what would ({"fits",
    "compiled", "per_device_bytes", "remedies"}; `placer` places it otherwise)."""
    needed = state_bytes(state)
    if needed["total"] <= usable:
        return None
    return {
        "fits": False,
        "compiled": False,
        "per_device_bytes": {
            "parameters": needed["parameters"],
            "optimizer_state": needed["optimizer_state"],
            "gradients": needed["gradients"],
            "temporaries": None,
            "peak": needed["total"],
        },
        "remedies": remedies(placer, mesh, strategy, usable),
    }
