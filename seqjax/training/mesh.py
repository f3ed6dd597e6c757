"""The device mesh and how arrays are placed on it.

A single device is a mesh of size one; every run, small or large, goes through the same
program. The batch is split along the `data` axis; where parameters and optimizer state
go is the sharding strategy's business (`seqjax.training.sharding`). Devices are laid out
by `jax.make_mesh`, which keeps each `model` group on closely connected devices and, in a
multi-process run, each process's devices on a contiguous block of the `data` axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

AXES = ("data", "model")


def parse_mesh(spec: str, num_devices: int) -> dict[str, int]:
    """Parses `data:4,model:2` into axis sizes; one size may be -1 (the remaining devices).

    Raises:
      ValueError: unknown axis, malformed entry, or sizes whose product is not `num_devices`.
    """
    sizes: dict[str, int] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, sep, value = part.partition(":")
        if name not in AXES or not sep:
            raise ValueError(f"train.mesh entries must be AXIS:SIZE with AXIS in {AXES}, got {part!r}")
        try:
            sizes[name] = int(value)
        except ValueError:
            raise ValueError(f"train.mesh size must be an integer, got {part!r}") from None
        if sizes[name] == 0 or sizes[name] < -1:
            raise ValueError(f"train.mesh size must be positive or -1, got {part!r}")
    sizes = {axis: sizes.get(axis, 1) for axis in AXES}
    free = [axis for axis, size in sizes.items() if size == -1]
    if len(free) > 1:
        raise ValueError(f"train.mesh may leave at most one axis as -1, got {spec!r}")
    known = math.prod(size for size in sizes.values() if size != -1)
    if free:
        if num_devices % known:
            raise ValueError(f"train.mesh {spec!r}: {known} does not divide the {num_devices} devices")
        sizes[free[0]] = num_devices // known
    if math.prod(sizes.values()) != num_devices:
        raise ValueError(
            f"train.mesh {spec!r} needs {math.prod(sizes.values())} devices, but {num_devices} are available"
        )
    return sizes


def make_mesh(spec: str = "data:-1", devices: Sequence[jax.Device] | None = None) -> Mesh:
    """The mesh of `spec` over `devices` (default: every device of every process)."""
    devices = list(jax.devices() if devices is None else devices)
    sizes = parse_mesh(spec, len(devices))
    shape = [sizes[a] for a in AXES]
    if devices == jax.devices():
        # Auto axes: shardings are chosen by the program (NamedSharding), not carried by types.
        return jax.make_mesh(shape, AXES, axis_types=(AxisType.Auto,) * len(AXES))
    return Mesh(np.asarray(devices).reshape(shape), AXES)


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) axis split over `data`; the rest replicated."""
    return NamedSharding(mesh, P("data"))


def check_batch_size(batch_size: int, mesh: Mesh, accum_steps: int = 1) -> None:
    """Every microbatch (batch_size / accum_steps rows) must split evenly over `data`."""
    data = mesh.shape["data"]
    if batch_size % (data * accum_steps):
        times = f" times optim.accum_steps={accum_steps}" if accum_steps > 1 else ""
        raise ValueError(f"train.batch_size must be divisible by the data axis size {data}{times}, got {batch_size}")
