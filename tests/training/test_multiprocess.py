"""Real multi-process runs: two OS processes on localhost, 4 CPU devices each, gloo collectives."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from seqjax.config import TrainConfig
from seqjax.data.batching import LMBatches
from seqjax.training import distributed, optim
from seqjax.training.distributed import initialize_arguments
from seqjax.training.experiment import build_experiment
from seqjax.training.layout import batch_sharding, make_mesh
from seqjax.training.state import Checkpointer, init_state, restore_state
from seqjax.training.steps import make_train_step

from helpers import tiny, tiny_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LR = 1e-3
SETTINGS = ["model.dropout=0.0", f"optim.learning_rate={LR}", "train.batch_size=16", "train.steps=2",
            "train.log_every=1", "train.checkpoint_every=2", "train.eval_batches=1", "train.num_printed_samples=0"]

TRAIN_WORKER = """
import sys
from seqjax import config
from seqjax.training.loop import train
workdir, *overrides = sys.argv[1:]
train(config.override(config.Config(), overrides), workdir)
"""

COLLECTIVE_WORKER = """
import sys
import jax
import numpy as np
from seqjax.config import TrainConfig
from seqjax.data.batching import LMBatches
from seqjax.training import distributed
from seqjax.training.layout import batch_sharding, make_mesh
port, process_id = sys.argv[1:]
distributed.initialize(TrainConfig(distributed=True, coordinator=f"127.0.0.1:{port}", num_processes=2,
                                   process_id=int(process_id), heartbeat_timeout=3))
batches = LMBatches(np.arange(33, dtype=np.int32), batch_size=8, seq_len=4, seed=0)
values = distributed.global_batch(batches, 0, batch_sharding(make_mesh("data:8")))["mask"]
total = jax.jit(lambda x: x.sum())
print("ready", float(total(values)), flush=True)
while True:
    total(values).block_until_ready()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(code, args, log_prefix):
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu", PYTHONPATH=REPO)
    with open(f"{log_prefix}.out", "w") as out, open(f"{log_prefix}.err", "w") as err:  # the child keeps its copies
        return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, env=env, stdout=out, stderr=err)


def tail(path, lines=30):
    with open(path) as f:
        return "".join(f.readlines()[-lines:])


def wait_all(processes, logs, timeout):
    deadline = time.monotonic() + timeout
    try:
        return [p.wait(timeout=max(deadline - time.monotonic(), 1)) for p in processes]
    except subprocess.TimeoutExpired:
        pytest.fail("worker timed out:\n" + "\n".join(tail(f"{log}.err") for log in logs))
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_distributed_settings_come_from_the_config_else_the_environment():
    environ = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
    from_env = initialize_arguments(TrainConfig(distributed=True), environ)
    assert from_env == {"coordinator_address": "10.0.0.1:1234", "num_processes": 4, "process_id": 3,
                        "heartbeat_timeout_seconds": 100}
    from_config = initialize_arguments(TrainConfig(distributed=True, process_id=0, heartbeat_timeout=7), environ)
    assert from_config["process_id"] == 0 and from_config["heartbeat_timeout_seconds"] == 7


def test_cluster_detection_fills_what_neither_config_nor_environment_sets():
    assert initialize_arguments(TrainConfig(distributed=True), {}) == {"heartbeat_timeout_seconds": 100}


def test_a_loopback_coordinator_listens_on_loopback_only():
    arguments = initialize_arguments(TrainConfig(coordinator="127.0.0.1:4000", num_processes=2, process_id=1), {})
    assert arguments["coordinator_bind_address"] == "127.0.0.1:4000"


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"coordinator": "10.0.0.1"}, "HOST:PORT"),
        ({"num_processes": 2, "process_id": 2}, r"process_id must be in \[0, 2\), got 2"),
        ({"num_processes": -1}, "num_processes must be >= 1"),
        ({"heartbeat_timeout": 0}, "heartbeat_timeout must be >= 1"),
    ],
)
def test_malformed_distributed_settings_are_clear_errors(settings, message):
    with pytest.raises(ValueError, match=message):
        initialize_arguments(TrainConfig(distributed=True, **settings), {})


def test_local_rows_of_a_data_sharded_batch_are_each_devices_rows_in_order():
    sharding = batch_sharding(make_mesh("data:8", jax.devices()[:8]))
    assert distributed.local_rows(sharding, 16) == [(2 * d, 2 * d + 2) for d in range(8)]


def test_assembling_process_local_rows_equals_placing_the_whole_batch(monkeypatch):
    """The multi-process path, taken in one process that holds every row: the global arrays
    built from the rows its devices hold equal `jax.device_put` of the whole batch."""
    sharding = batch_sharding(make_mesh("data:4,model:2", jax.devices()[:8]))
    batches = LMBatches(np.random.default_rng(0).integers(0, 50, 300).astype(np.int32), 8, 5, seed=1)
    placed = jax.device_put(batches.batch(7), sharding)
    monkeypatch.setattr(distributed.jax, "process_count", lambda: 2)
    assembled = distributed.global_batch(batches, 7, sharding)
    for name, value in placed.items():
        assert assembled[name].shape == value.shape and assembled[name].sharding == sharding
        np.testing.assert_array_equal(np.asarray(assembled[name]), np.asarray(value))


def one_process_reference(exp, steps):
    """(params, losses) of `steps` updates in this process on its 8 devices."""
    cfg = exp.cfg
    mesh = make_mesh("data:8", jax.devices()[:8])
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    batches = exp.train_batches()
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, batches.batch(0), mesh)
    step = make_train_step(exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state)
    losses = []
    for i in range(steps):
        state, metrics = step(state, jax.device_put(batches.batch(i), batch_sharding(mesh)))
        losses.append(float(metrics["loss"]))
    return state.params, losses


@pytest.mark.slow
def test_two_processes_train_like_one_process_with_eight_devices(tmp_path):
    port, workdir = free_port(), tmp_path / "run"
    shared = [*tiny(*SETTINGS), "train.mesh=data:8", "train.distributed=true", f"train.coordinator=127.0.0.1:{port}",
              "train.num_processes=2", "train.heartbeat_timeout=30"]
    logs = [str(tmp_path / f"process{i}") for i in range(2)]
    processes = [launch(TRAIN_WORKER, [str(workdir), *shared, f"train.process_id={i}"], logs[i]) for i in range(2)]
    codes = wait_all(processes, logs, timeout=420)
    assert codes == [0, 0], "\n".join(tail(f"{log}.err") for log in logs)

    exp = build_experiment(tiny_config(*SETTINGS))
    params, losses = one_process_reference(exp, 2)
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    np.testing.assert_allclose([r["loss"] for r in records if r["split"] == "train"], losses, rtol=1e-5)
    mesh = make_mesh("data:8", jax.devices()[:8])
    checkpointer = Checkpointer.of_run(str(workdir), exp.cfg.train.keep_checkpoints)
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    restored, _ = restore_state(exp, checkpointer, 2, optimizer, mesh, exp.train_batches().batch(0))
    checkpointer.close()
    for got, want in zip(jax.tree.leaves(restored.params), jax.tree.leaves(params)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=LR / 2)
    assert "parameters on a mesh" in tail(f"{logs[0]}.out", 1000)
    # Only process 0 prints; gloo's own connection lines ("[Gloo] Rank 6 is connected to 7 peer
    # ranks...", sometimes split across lines when written concurrently) are not ours.
    printed = [line for line in tail(f"{logs[1]}.out", 1000).splitlines()
               if line.strip() and "[Gloo]" not in line and "peer ranks" not in line]
    assert printed == []


def test_killing_one_process_stops_the_other_with_a_clear_error(tmp_path):
    port = free_port()
    logs = [str(tmp_path / f"process{i}") for i in range(2)]
    processes = [launch(COLLECTIVE_WORKER, [str(port), str(i)], logs[i]) for i in range(2)]
    try:
        deadline = time.monotonic() + 120
        while not all("ready" in tail(f"{log}.out") for log in logs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                pytest.fail("workers did not start:\n" + "\n".join(tail(f"{log}.err") for log in logs))
            time.sleep(0.2)
        processes[1].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        code = processes[0].wait(timeout=60)
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert code != 0 and time.monotonic() - killed_at < 60
    error = tail(f"{logs[0]}.err", 200)
    assert "stopped sending heartbeats" in error or "another task died" in error, error
