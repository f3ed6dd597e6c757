"""Accelerators a run can be compiled for without having them: their figures, and their devices.

A target is named as on the command line: `h100:8` (GPUs: kind and count, in hosts of 8), or a
TPU topology `v5e:2x2`, `v5p:4x4x4` (chips per axis), optionally of several slices joined by the
data-center network (`slices`). JAX builds the devices of such a target from a description:
for a GPU, the `GpuTargetConfig` text in `gpus/` through the CUDA plugin (`seqjax[gpu]`); for a
TPU, libtpu's topology (`seqjax[tpu]`). Both are compiled for on this machine's CPU, which must
then be JAX's platform (`use_target_compiler`).

The figures are the published ones per device: the dense bf16 matmul peak, the memory, its
bandwidth, and the bandwidth of the links collectives cross (NVLink or the TPU's ICI within a
slice, the data-center network between slices), one direction: the roofline bound of `seqjax
compile`, and, with the measured figures of `calibration.json`, its per-kernel estimate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.resources
import importlib.util
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

GPU_HOST = 8  # GPUs per host in a GPU target of more than one host


@dataclasses.dataclass(frozen=True)
class Chip:
    """Per-device figures of one accelerator kind."""

    platform: str  # "gpu" | "tpu"
    name: str  # as people write it
    peak_tflops: float  # dense bf16 matmul peak, TFLOP/s
    memory_bytes: int  # device memory (HBM)
    memory_bandwidth: float  # bytes/s
    link_bandwidth: float  # bytes/s one direction, within a host or slice (NVLink, ICI)
    dcn_bandwidth: float = 0.0  # bytes/s one direction per device between slices (TPU only)
    topology_name: str = ""  # libtpu's name, TPU only


CHIPS = {
    "h100": Chip("gpu", "H100 SXM 80GB", 989.0, 84_942_979_072, 3.35e12, 450e9),
    "h200": Chip("gpu", "H200 SXM 141GB", 989.0, 151_397_597_184, 4.8e12, 450e9),
    "a100": Chip("gpu", "A100 SXM 80GB", 312.0, 85_100_068_864, 2.04e12, 300e9),
    "v4": Chip("tpu", "TPU v4", 275.0, 32 * 2**30, 1.2e12, 270e9, 6.25e9, "v4"),
    "v5e": Chip("tpu", "TPU v5e", 197.0, 16 * 2**30, 0.82e12, 200e9, 6.25e9, "v5e"),
    "v5p": Chip("tpu", "TPU v5p", 459.0, 95 * 2**30, 2.765e12, 600e9, 6.25e9, "v5p"),
}
EXAMPLES = "h100:8, h200:8, a100:8, v5e:2x2, v5p:2x2x2, v5p:4x4x4"
INSTALL = {"gpu": "pip install 'seqjax[gpu]'", "tpu": "pip install 'seqjax[tpu]'"}


@dataclasses.dataclass(frozen=True)
class Target:
    """A named accelerator system: `count` devices of `chip` in `slices` slices."""

    name: str  # as given, e.g. "v5p:4x4x4"
    chip: Chip
    shape: tuple[int, ...]  # GPUs: (count,); TPUs: chips per axis of one slice
    slices: int = 1

    @property
    def devices_per_slice(self) -> int:
        return math.prod(self.shape)

    @property
    def count(self) -> int:
        return self.devices_per_slice * self.slices

    def describe(self) -> str:
        slices = f" x {self.slices} slices" if self.slices > 1 else ""
        return f"{self.count} x {self.chip.name} ({self.name}{slices})"


def parse_target(name: str, slices: int = 1) -> Target:
    """`h100:8` or `v5p:4x4x4` (and the number of slices) as a Target.

    Raises:
      ValueError: an unknown kind or a malformed count or topology, with the known targets.
    """
    kind, sep, shape_text = name.strip().lower().partition(":")
    if kind not in CHIPS:
        raise ValueError(f"unknown target {name!r}: known kinds are {', '.join(CHIPS)}, e.g. {EXAMPLES}")
    chip = CHIPS[kind]
    try:
        shape = tuple(int(part) for part in shape_text.split("x")) if sep else ()
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        form = "COUNT, e.g. h100:8" if chip.platform == "gpu" else "chips per axis, e.g. v5p:4x4x4"
        raise ValueError(f"target {name!r}: after the kind comes {form}")
    if chip.platform == "gpu" and (len(shape) != 1 or (shape[0] > GPU_HOST and shape[0] % GPU_HOST)):
        raise ValueError(f"target {name!r}: a GPU target is kind:COUNT, COUNT <= 8 or a multiple of 8")
    if isinstance(slices, bool) or not isinstance(slices, int) or slices < 1:
        raise ValueError(f"--slices must be a positive integer, got {slices!r}")
    if chip.platform == "gpu" and slices != 1:
        raise ValueError(f"--slices joins TPU slices over the data-center network; {name} is a GPU target")
    return Target(name, chip, shape, slices)


def use_target_compiler() -> None:
    """Makes the CPU JAX's platform and lets the CUDA plugin load without a GPU: what compiling
    for a target needs. Must run before anything touches a JAX backend.

    Raises:
      ValueError: JAX's backends were already started on another platform.
    """
    import jax
    from jax._src import xla_bridge

    from seqjax.platforms import quiet_deviceless_libtpu

    quiet_deviceless_libtpu()
    os.environ["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"
    # libtpu locks the machine's TPUs for one process; compiling for a topology touches none, and
    # several processes may compile at once (a test run's workers).
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if xla_bridge.backends_are_initialized():
        if jax.default_backend() != "cpu":
            raise ValueError(f"compiling for a target needs JAX on the CPU, but it runs on {jax.default_backend()}")
        return
    jax.config.update("jax_platforms", "cpu")


@contextlib.contextmanager
def uncached_compiles() -> Iterator[None]:
    """Compiles inside the block write nothing to JAX's persistent compilation cache (where the
    user set one): an executable built for a target's devices cannot be loaded on this machine,
    so an entry would only fill the disk, and the next `seqjax compile` reading it back would
    print a warning per program ("PjRtCompiler must be constructed with a Client") before
    compiling anew. No compile takes forever, so none reaches the cache's minimum time."""
    import jax

    key = "jax_persistent_cache_min_compile_time_secs"
    before = getattr(jax.config, key)
    jax.config.update(key, math.inf)
    try:
        yield
    finally:
        jax.config.update(key, before)


def _require_plugin(chip: Chip) -> None:
    module = "jax_plugins.xla_cuda12" if chip.platform == "gpu" else "libtpu"
    if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
        raise ValueError(
            f"compiling for a {chip.name} needs the {'CUDA' if chip.platform == 'gpu' else 'TPU'} plugin of JAX: "
            f"{INSTALL[chip.platform]}"
        )


def gpu_description(kind: str) -> str:
    """The GpuTargetConfig text shipped for GPU `kind` (h100, h200, a100)."""
    return importlib.resources.files("seqjax.accelerators").joinpath(f"gpus/{kind}.txtpb").read_text()


def target_devices(target: Target) -> Sequence[Any]:
    """The target's devices as JAX describes them: what a Mesh is made of to compile for it.

    Raises:
      ValueError: the plugin the target needs is not installed (the pip line to run).
    """
    from jax.experimental import topologies

    chip = target.chip
    _require_plugin(chip)
    if chip.platform == "gpu":
        count = target.count
        hosts, per_host = (1, count) if count <= GPU_HOST else (count // GPU_HOST, GPU_HOST)
        kind = target.name.split(":")[0].lower()
        topology = topologies.get_topology_desc(
            kind, "cuda", target_config=gpu_description(kind), topology=f"1x{hosts}x{per_host}"
        )
        return topology.devices
    topology_name = f"{chip.topology_name}:{'x'.join(map(str, target.shape))}"
    topology = topologies.get_topology_desc(topology_name=topology_name, platform="tpu", num_slices=target.slices)
    return topology.devices
