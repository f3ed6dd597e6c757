"""The kernels that take most of a train step, read from a `jax.profiler` trace.

`jax.profiler.trace` writes the trace as an XSpace (`plugins/profile/<time>/<host>.xplane.pb`),
which `jax.profiler.ProfileData.from_file` reads without TensorBoard. What ran on a device is
found where the profiler puts it:

* on an NVIDIA GPU, the plane "/device:GPU:<n>" holds a line per CUDA stream ("Stream #7(Kernel,
  MemcpyH2D)"), each event a kernel (its demangled name) or a copy, with the XLA instruction that
  launched it as the stat `hlo_op` (from XLA's annotation); the lines of CUPTI's own overhead and
  of CUDA graphs' ids are not kernels;
* on a CPU, the host plane's threads hold each of XLA's thunks as an event with an `hlo_op` stat.

Kernels on several streams can overlap, so their times may add up to more than the step.
"""

from __future__ import annotations

import collections
import glob
import os
from collections.abc import Callable, Iterator
from typing import Any

NAME_CHARS = 200  # a templated CUDA kernel's demangled name runs to thousands of characters


def record(run: Callable[[], None], directory: str) -> Any:
    """Runs `run()` under `jax.profiler.trace` into `directory`; the trace, a `jax.profiler.ProfileData`."""
    import jax

    with jax.profiler.trace(directory):
        run()
    (path,) = glob.glob(os.path.join(directory, "plugins", "profile", "*", "*.xplane.pb"))
    return jax.profiler.ProfileData.from_file(path)


def device_events(profile: Any) -> Iterator[tuple[str, str | None, float]]:
    """(kernel name, the `hlo_op` that launched it or None, seconds) of each kernel or copy in
    `profile` (a `jax.profiler.ProfileData`): a GPU's where the trace has one, else the CPU's thunks."""
    gpus = [plane for plane in profile.planes if plane.name.startswith("/device:GPU:")]
    if gpus:
        for plane in gpus:
            for line in plane.lines:
                if line.name.startswith("Stream #"):
                    for event in line.events:
                        yield event.name, dict(event.stats).get("hlo_op"), event.duration_ns * 1e-9
        return
    host = profile.find_plane_with_name("/host:CPU")
    for line in host.lines if host is not None else []:
        for event in line.events:
            op = dict(event.stats).get("hlo_op")
            if op is not None:
                yield event.name, op, event.duration_ns * 1e-9


def top_kernels(profile: Any, steps: int, step_seconds: float, count: int = 10) -> dict[str, Any]:
    """The `count` kernels of the trace `profile` (of `steps` train steps of `step_seconds` each)
    that took the most time, by kernel name: per step its milliseconds, share of the step and
    launches, and up to three of the XLA instructions that launched it; and all kernels' time
    and launches per step.

    Raises:
      ValueError: the trace holds no kernel.
    """
    seconds: dict[str, float] = collections.defaultdict(float)
    launches: collections.Counter[str] = collections.Counter()
    ops: dict[str, set[str]] = collections.defaultdict(set)
    for name, op, duration in device_events(profile):
        seconds[name] += duration
        launches[name] += 1
        if op is not None:
            ops[name].add(str(op))
    if not seconds:
        raise ValueError("the trace holds no kernel of a GPU nor thunk of a CPU")
    ranked = sorted(seconds, key=lambda name: -seconds[name])[:count]
    return {
        "kernel_ms_per_step": 1000 * sum(seconds.values()) / steps,
        "launches_per_step": sum(launches.values()) / steps,
        "top": [
            {
                "name": name[:NAME_CHARS],
                "ms_per_step": 1000 * seconds[name] / steps,
                "share_of_step": seconds[name] / steps / step_seconds,
                "launches_per_step": launches[name] / steps,
                "hlo_ops": sorted(ops[name])[:3],
            }
            for name in ranked
        ],
    }
