"""Multi-process runs on JAX's own multi-controller runtime (`jax.distributed`).

Every process runs the same program on its local devices; `jax.distributed.initialize`
connects them through a coordinator (process 0), after which `jax.devices()` lists every
device of every process and one jitted step spans them all. seqjax adds only the edges:
where the settings come from, which rows of a batch a process supplies, and which process
speaks. Settings come from the config, else the environment (`JAX_COORDINATOR_ADDRESS`,
`JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`), else JAX's cluster detection (Cloud TPU, SLURM,
Open MPI, Kubernetes). A process that stops sending heartbeats for `heartbeat_timeout`
seconds is declared dead and the coordination service terminates the others with an error
naming it, so a lost peer never leaves a run hanging.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding

from seqjax.config import TrainConfig
from seqjax.data.batching import LMBatches, Seq2SeqBatches

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"${name} must be an integer, got {value!r}") from None


def initialize_arguments(cfg: TrainConfig, environ: Mapping[str, str] = os.environ) -> dict:
    """The keyword arguments of `jax.distributed.initialize` for `cfg`, checked on the host.

    Unset values (coordinator "", num_processes 0, process_id -1) fall back to the
    environment, then to JAX's cluster detection (left out of the arguments).

    Raises:
      ValueError: a malformed coordinator address, num_processes < 1, or a process id
        outside [0, num_processes).
    """
    coordinator = cfg.coordinator or environ.get("JAX_COORDINATOR_ADDRESS", "")
    num_processes = cfg.num_processes or _env_int(environ, "JAX_NUM_PROCESSES")
    process_id = cfg.process_id if cfg.process_id >= 0 else _env_int(environ, "JAX_PROCESS_ID")
    if coordinator:
        host, sep, port = coordinator.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"train.coordinator must be HOST:PORT, got {coordinator!r}")
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"train.num_processes must be >= 1, got {num_processes}")
    if process_id is not None and num_processes is not None and not 0 <= process_id < num_processes:
        raise ValueError(f"train.process_id must be in [0, {num_processes}), got {process_id}")
    if cfg.heartbeat_timeout < 1:
        raise ValueError(f"train.heartbeat_timeout must be >= 1 second, got {cfg.heartbeat_timeout}")
    arguments: dict = {"heartbeat_timeout_seconds": cfg.heartbeat_timeout}
    if coordinator:
        arguments["coordinator_address"] = coordinator
        if coordinator.rpartition(":")[0] in LOOPBACK_HOSTS:
            # A single-machine run listens on loopback only, not on every interface.
            arguments["coordinator_bind_address"] = coordinator
    if num_processes is not None:
        arguments["num_processes"] = num_processes
    if process_id is not None:
        arguments["process_id"] = process_id
    return arguments


def initialize(cfg: TrainConfig) -> None:
    """Joins the multi-process run when `cfg.distributed` is set; must precede any computation."""
    if not cfg.distributed or jax.distributed.is_initialized():
        return
    jax.distributed.initialize(**initialize_arguments(cfg))


def is_main_process() -> bool:
    """Process 0 prints, logs and writes the run's files; every process saves its checkpoint shards."""
    return jax.process_index() == 0


def local_rows(sharding: NamedSharding, rows: int) -> list[tuple[int, int]]:
    """The row ranges [start, stop) of a [rows, ...] array split by `sharding` that this
    process's devices hold, in order (replicas counted once)."""
    ranges = set()
    for index in sharding.addressable_devices_indices_map((rows,)).values():
        start, stop, _ = index[0].indices(rows) if index else (0, rows, 1)
        ranges.add((start, stop))
    return sorted(ranges)


def global_batch(batches: LMBatches | Seq2SeqBatches, index: int, sharding: NamedSharding) -> dict[str, jax.Array]:
    """Batch `index` of `batches` as global [B, ...] arrays split over devices by `sharding`.

    In a single-process run this is `jax.device_put` of the whole batch. In a multi-process
    run each process builds only the rows its own devices hold (`local_rows`, N of the B rows)
    and `jax.make_array_from_process_local_data` assembles the global arrays from these
    [N, ...] pieces without any transfer between processes.

    Returns:
      the arrays of `batches.batch(index)`, each [B, ...] with its dtype, sharded by `sharding`.
    """
    rows = None if jax.process_count() == 1 else local_rows(sharding, batches.batch_size)
    return to_global(batches.batch(index, rows=rows), batches.batch_size, sharding)


def to_global(local: Mapping[str, np.ndarray], batch_size: int, sharding: NamedSharding) -> dict[str, jax.Array]:
    """This process's rows of a batch (`local_rows`; all B rows in a single process) as the
    global [B, ...] arrays split over devices by `sharding`."""
    if jax.process_count() == 1:
        result: dict[str, jax.Array] = jax.device_put(dict(local), sharding)
        return result
    return {
        name: jax.make_array_from_process_local_data(sharding, value, (batch_size, *value.shape[1:]))
        for name, value in local.items()
    }


def barrier(name: str) -> None:
    """Waits until every process reaches the barrier `name` (no-op in a single process)."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)
