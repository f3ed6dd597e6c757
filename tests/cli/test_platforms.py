"""The JAX platforms a command starts: chosen from the device files the machine has, so that a
machine without a GPU or TPU starts no plugin to fail (and prints no traceback), while a set
JAX_PLATFORMS and an accelerator machine's own choice are kept."""

import os
import subprocess
import sys

import pytest

from seqjax import platforms
from seqjax.platforms import platforms_for, quiet_deviceless_libtpu, use_machine_platforms

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
    "devices, cuda_plugin, chosen",
    [
        ([], True, "cpu"),  # no accelerator: the CUDA plugin and libtpu are not started
        ([], False, "cpu"),
        (["/dev/nvidia0", "/dev/nvidiactl"], True, "cuda,cpu"),
        (["/dev/nvidiactl"], False, None),  # no plugin: JAX's own fallback and its warning
        (["/dev/accel0"], False, None),  # a TPU: JAX (cloud_tpu_init) chooses tpu,cpu itself
        (["/dev/vfio/0"], True, None),
        (["/dev/kfd"], False, None),  # an AMD GPU
        (["/dev/nvidia0", "/dev/accel0"], True, None),
    ],
)
def test_the_platforms_follow_the_device_files_present(devices, cuda_plugin, chosen):
    assert platforms_for(devices, cuda_plugin) == chosen


@pytest.mark.parametrize("value", ["cuda", ""])
def test_a_jax_platforms_the_user_set_is_kept(value):
    environ = {"JAX_PLATFORMS": value}
    use_machine_platforms(environ)
    assert environ == {"JAX_PLATFORMS": value}


def test_libtpu_is_told_this_machine_is_one_host_only_where_it_has_no_tpu(monkeypatch):
    monkeypatch.setattr(platforms, "tpu_device_files", lambda: [])
    environ = {"TPU_HOST_BOUNDS": "2,2,1"}  # the user's, kept
    quiet_deviceless_libtpu(environ)
    assert environ == {"TPU_HOST_BOUNDS": "2,2,1", "TPU_WORKER_HOSTNAMES": "localhost"}
    monkeypatch.setattr(platforms, "tpu_device_files", lambda: ["/dev/vfio/0"])
    environ = {}
    quiet_deviceless_libtpu(environ)
    assert environ == {}


def run(args, cwd):
    """stderr of `python args` with JAX_PLATFORMS unset, as a user's shell has it."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    env["PYTHONPATH"] = REPO
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


NOISE = ("Traceback", "cuInit", "E0000", "WARNING: could not determine TPU")


@pytest.mark.slow
def test_a_command_on_this_machine_prints_no_plugin_traceback(tmp_path):
    """A tiny training run starts JAX's backends: with the CUDA plugin installed and no GPU,
    JAX alone logs its failed start (a traceback) before the run's own output."""
    (tmp_path / "corpus.txt").write_text("hello world\nthe cat sat\n" * 8)
    tiny = ["model.d_model=16", "model.layers=1", "model.num_heads=2", "model.d_ff=16", "data.seq_len=8"]
    train = [f"data.train={tmp_path / 'corpus.txt'}", "train.steps=1", "train.batch_size=8", "train.eval_every=0"]
    sets = ["data.kind=text", *train, *tiny, "train.num_printed_samples=0"]
    err = run(["-m", "seqjax.cli", "train", "--workdir", str(tmp_path / "run"), "--set", *sets], tmp_path)
    assert not [line for line in err.splitlines() if any(noise in line for noise in NOISE)], err


def test_a_deviceless_tpu_topology_is_made_without_libtpu_errors(tmp_path):
    pytest.importorskip("libtpu")
    code = (
        "from seqjax.accelerators.targets import parse_target, target_devices, use_target_compiler\n"
        "use_target_compiler()\n"
        "assert len(target_devices(parse_target('v5e:2x2'))) == 4\n"
    )
    err = run(["-c", code], tmp_path)
    assert not [line for line in err.splitlines() if any(noise in line for noise in NOISE)], err
