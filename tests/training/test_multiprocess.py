"""Real multi-process runs: two OS processes on localhost, 4 CPU devices each, gloo collectives."""

import contextlib
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
from helpers import EXACT_UPDATES, assert_trains_alike, child_environment
from tiny_runs import tiny, tiny_config

from seqjax import optimizers as optim
from seqjax.config import TrainConfig
from seqjax.data.batching import LMBatches
from seqjax.training.core import distributed
from seqjax.training.core.distributed import initialize_arguments
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import batch_sharding, make_mesh
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import init_state, restore_state
from seqjax.training.core.steps import make_train_step

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LR = 1e-3
STEPS = 4
SETTINGS = [
    *EXACT_UPDATES,
    f"optim.learning_rate={LR}",
    "train.batch_size=16",
    f"train.steps={STEPS}",
    "train.log_every=1",
    f"train.checkpoint_every={STEPS}",
    "train.eval_batches=1",
]
# Seconds without heartbeats before a process counts as dead: generous, so that a healthy
# process on starved cores is never declared dead.
HEARTBEAT_TIMEOUT = 20
# Where a peer is killed, the survivor's wait for it to count as dead: a healthy process's
# heartbeats come from a thread of their own, never starved for this long on a busy machine.
PEER_TIMEOUT = 6

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
from seqjax.training.core import distributed
from seqjax.training.core.layout import batch_sharding, make_mesh
port, process_id = sys.argv[1:3]
distributed.initialize(TrainConfig(distributed=True, coordinator=f"127.0.0.1:{port}", num_processes=2,
                                   process_id=int(process_id), heartbeat_timeout=int(sys.argv[3])))
batches = LMBatches(np.arange(33, dtype=np.int32), batch_size=8, seq_len=4, seed=0)
values = distributed.global_batch(batches, 0, batch_sharding(make_mesh("data:8")))["mask"]
total = jax.jit(lambda x: x.sum())
print("ready", float(total(values)), flush=True)
while True:
    total(values).block_until_ready()
"""


@contextlib.contextmanager
def reserved_port():
    """A free loopback port, held for the whole block so that nothing else can take it between
    its choice and the coordinator's bind. The holding socket never listens and sets
    SO_REUSEPORT, as JAX's gRPC coordinator does; only such sockets of this user may share
    the port, and the kernel hands a bound port to no other `bind(0)`."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def launch(code, args, log_prefix):
    """A worker process on 4 CPU devices (`child_environment`)."""
    env = {**child_environment(4), "PYTHONPATH": REPO}
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
    assert from_env == {
        "coordinator_address": "10.0.0.1:1234",
        "num_processes": 4,
        "process_id": 3,
        "heartbeat_timeout_seconds": 100,
    }
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
    """(params, [(loss, grad_norm) of each step]) of `steps` updates in this process on its 8 devices."""
    cfg = exp.cfg
    mesh = make_mesh("data:8", jax.devices()[:8])
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    batches = exp.train_batches()
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, batches.batch(0), mesh)
    step = make_train_step(exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state)
    records = []
    for i in range(steps):
        state, metrics = step(state, jax.device_put(batches.batch(i), batch_sharding(mesh)))
        records.append((float(metrics["loss"]), float(metrics["grad_norm"])))
    return jax.device_get(state.params), records


@pytest.mark.slow
def test_two_processes_train_like_one_process_with_eight_devices_and_only_process_zero_prints(tmp_path):
    """Loss and gradient norm of each update, and the parameters of the multi-process
    checkpoint, equal those of the same updates in one process; what process 0 prints of the
    run (its layout, its evaluations), process 1 does not."""
    workdir, logs = tmp_path / "run", [str(tmp_path / f"process{i}") for i in range(2)]
    with reserved_port() as port:
        shared = [
            *tiny(*SETTINGS),
            "train.mesh=data:8",
            "train.distributed=true",
            f"train.coordinator=127.0.0.1:{port}",
            "train.num_processes=2",
            f"train.heartbeat_timeout={HEARTBEAT_TIMEOUT}",
        ]
        processes = [launch(TRAIN_WORKER, [str(workdir), *shared, f"train.process_id={i}"], logs[i]) for i in range(2)]
        codes = wait_all(processes, logs, timeout=540)
    assert codes == [0, 0], "\n".join(tail(f"{log}.err") for log in logs)

    exp = build_experiment(tiny_config(*SETTINGS))
    reference = one_process_reference(exp, STEPS)
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    logged = [(r["loss"], r["grad_norm"]) for r in map(json.loads, lines) if r["split"] == "train"]
    mesh = make_mesh("data:8", jax.devices()[:8])
    checkpointer = RunDir(str(workdir)).checkpointer(exp.cfg.train.keep_checkpoints)
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    restored, _ = restore_state(exp, checkpointer, STEPS, optimizer, mesh, exp.train_batches().batch(0))
    checkpointer.close()
    assert_trains_alike((jax.device_get(restored.params), logged), reference, learning_rate=LR, steps=STEPS)

    printed = [open(f"{log}.out").read() for log in logs]
    for ours in ("parameters on a mesh", "valid: ", "test: "):
        assert ours in printed[0] and ours not in printed[1], ours


@pytest.mark.slow
def test_killing_one_process_stops_the_other_instead_of_leaving_it_blocked(tmp_path):
    """The survivor, busy in collectives with the killed process, exits with a failure within
    a few heartbeat timeouts."""
    logs = [str(tmp_path / f"process{i}") for i in range(2)]
    with reserved_port() as port:
        processes = [launch(COLLECTIVE_WORKER, [str(port), str(i), str(PEER_TIMEOUT)], logs[i]) for i in range(2)]
        try:
            deadline = time.monotonic() + 300
            while not all("ready" in tail(f"{log}.out") for log in logs):
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    pytest.fail("workers did not start:\n" + "\n".join(tail(f"{log}.err") for log in logs))
                time.sleep(0.2)
            processes[1].send_signal(signal.SIGKILL)
            code = processes[0].wait(timeout=6 * PEER_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the survivor still runs {6 * PEER_TIMEOUT} s after its peer was killed")
        finally:
            for p in processes:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    assert code != 0
