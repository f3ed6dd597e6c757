"""The JAX platforms a `seqjax` command starts, chosen from the devices the machine has.

JAX left to itself starts every plugin installed: on a machine without a GPU the CUDA plugin
(`seqjax[gpu]`, installed for `seqjax compile`) fails its start with a 15-line traceback, and
libtpu (`seqjax[tpu]`) logs errors about the TPU metadata it cannot find, before each command's
right answer. So when JAX_PLATFORMS is not set, the command line sets it from the device files
present, before JAX starts a backend: none (a CPU-only machine) -> `cpu`; NVIDIA's alone with the
CUDA plugin installed -> `cuda,cpu` (what JAX would run on; libtpu is not started to fail);
anything else (a TPU, an AMD GPU, an NVIDIA GPU without the plugin) -> JAX's own choice, as
before. A set JAX_PLATFORMS, even empty, is the user's choice and is kept.

Compiling for a TPU target without one (`seqjax compile`) loads libtpu all the same; there
`quiet_deviceless_libtpu` describes this machine to it as the single host it is, which libtpu
would otherwise ask the TPU metadata server for and log errors about not finding.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from collections.abc import Collection, MutableMapping

NVIDIA_DEVICES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg")  # the files JAX looks for (dxg: WSL2)
AMD_DEVICES = ("/dev/kfd",)
TPU_DEVICES = ("/dev/accel*", "/dev/vfio/[0-9]*")  # TPU v2-v4 chips; v5e and later through VFIO
CUDA_PLUGINS = ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13")


def platforms_for(devices: Collection[str], cuda_plugin: bool) -> str | None:
    """JAX_PLATFORMS for a machine whose accelerator device files are `devices` (paths under
    /dev), the CUDA plugin installed or not; None: leave the choice to JAX."""
    nvidia = any(path in NVIDIA_DEVICES for path in devices)
    others = [path for path in devices if path not in NVIDIA_DEVICES]
    if not nvidia and not others:
        return "cpu"
    if nvidia and not others and cuda_plugin:
        return "cuda,cpu"
    return None


def device_files() -> list[str]:
    """The accelerator device files of this machine (NVIDIA, AMD, TPU)."""
    return [path for path in NVIDIA_DEVICES + AMD_DEVICES if os.path.exists(path)] + tpu_device_files()


def tpu_device_files() -> list[str]:
    return sorted(path for pattern in TPU_DEVICES for path in glob.glob(pattern))


def cuda_plugin_installed() -> bool:
    """Whether JAX's CUDA plugin is installed (without the `jax_plugins` namespace at all, as on a
    machine without the gpu extra, `find_spec` of a module in it raises instead of saying None)."""
    if importlib.util.find_spec("jax_plugins") is None:
        return False
    return any(importlib.util.find_spec(name) is not None for name in CUDA_PLUGINS)


def use_machine_platforms(environ: MutableMapping[str, str] = os.environ) -> None:
    """Sets JAX_PLATFORMS from this machine's devices (`platforms_for`) unless it is set, and JAX's
    configuration with it where JAX is already imported (importing seqjax imports it) but has not
    started a backend yet (the platforms are then chosen, and kept)."""
    if "JAX_PLATFORMS" in environ:
        return
    jax_imported = "jax" in sys.modules
    if jax_imported:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            return
    chosen = platforms_for(device_files(), cuda_plugin_installed())
    if chosen is None:
        return
    environ["JAX_PLATFORMS"] = chosen  # for the processes this one starts
    if jax_imported:
        import jax

        jax.config.update("jax_platforms", chosen)


def quiet_deviceless_libtpu(environ: MutableMapping[str, str] = os.environ) -> None:
    """On a machine without a TPU, tells libtpu (before it loads) that this is one host, so that
    compiling for a TPU topology does not log errors about TPU metadata nobody needs; the
    topology compiled for is named in full and does not change. A TPU machine's settings (and
    any the user set) are kept."""
    if tpu_device_files():
        return
    environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    environ.setdefault("TPU_HOST_BOUNDS", "1,1,1")
