"""The XLA flags a `seqjax` command starts with on an NVIDIA GPU, each with its reason.

XLA reads `XLA_FLAGS` once, when JAX starts its first backend, so the command line adds these
before that (`use_gpu_flags`), only where the run will be on CUDA devices. What is set follows
what NVIDIA's JAX-Toolbox bakes into its images and what MaxText's GPU recipes set for
throughput, limited to the flags whose effect holds for every seqjax run:

* the latency-hiding scheduler: moves collectives so that they overlap the computation around
  them (JAX-Toolbox's one default flag); without it an FSDP step waits on each layer's gather;
* collectives on the highest-priority stream: a gather or a reduction overlapping a matmul is
  not starved by it, so that the overlap the scheduler planned happens;
* all-gather and reduce-scatter combined up to 128 MiB / 64 MiB: FSDP's per-layer collectives
  merged into fewer, larger ones that reach the interconnect's bandwidth.

Left out, each for a reason: the pipelined all-reduce, all-gather and reduce-scatter (a check
failure in XLA's collective pipeliner under gradient accumulation in a loop has been reported,
and seqjax accumulates in `lax.scan`); `--xla_gpu_enable_triton_gemm=false` and turning off
command buffers (their effect depends on the XLA version and the shapes: measure before setting).

The user's `XLA_FLAGS` win: a flag it names is kept as given, and `SEQJAX_GPU_FLAGS=off` sets
none (for measuring with and without). Every flag here exists in the XLA this package runs
with (an unknown one stops XLA at start; `tests/test_gpu_flags.py` starts a backend with them).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

GPU_FLAGS = (
    "--xla_gpu_enable_latency_hiding_scheduler=true",
    "--xla_gpu_enable_highest_priority_async_stream=true",
    "--xla_gpu_all_gather_combine_threshold_bytes=134217728",
    "--xla_gpu_reduce_scatter_combine_threshold_bytes=67108864",
)
SWITCH = "SEQJAX_GPU_FLAGS"  # "off": none of GPU_FLAGS


def _name(flag: str) -> str:
    return flag.split("=", 1)[0]


def with_gpu_flags(xla_flags: str) -> str:
    """`xla_flags` (the value of XLA_FLAGS) with each of `GPU_FLAGS` it does not name added
    after it; a flag it names keeps the user's value."""
    named = {_name(flag) for flag in xla_flags.split()}
    added = [flag for flag in GPU_FLAGS if _name(flag) not in named]
    return " ".join([*xla_flags.split(), *added])


def runs_on_cuda(jax_platforms: str | None) -> bool:
    """Whether a process whose JAX_PLATFORMS is `jax_platforms` starts on CUDA devices (None or
    "": JAX's choice, CUDA where the NVIDIA devices are)."""
    if jax_platforms:
        return jax_platforms.split(",")[0].strip() in ("cuda", "gpu")
    from seqjax.platforms import NVIDIA_DEVICES, cuda_plugin_installed

    return any(os.path.exists(path) for path in NVIDIA_DEVICES) and cuda_plugin_installed()


def use_gpu_flags(environ: MutableMapping[str, str] = os.environ) -> None:
    """Adds `GPU_FLAGS` to XLA_FLAGS where this process will run on CUDA devices, unless
    SEQJAX_GPU_FLAGS=off. Call before JAX starts a backend (after the platforms are chosen)."""
    if environ.get(SWITCH, "").lower() == "off" or not runs_on_cuda(environ.get("JAX_PLATFORMS")):
        return
    environ["XLA_FLAGS"] = with_gpu_flags(environ.get("XLA_FLAGS", ""))
