"""The XLA flags a command adds on a GPU: added only for CUDA, after the user's XLA_FLAGS (whose
values win), none with SEQJAX_GPU_FLAGS=off; and every one known to the installed XLA, which
stops at start on a flag it does not know."""

import os
import subprocess
import sys

import pytest

from seqjax.gpu_flags import GPU_FLAGS, SWITCH, runs_on_cuda, use_gpu_flags, with_gpu_flags


def test_the_flags_follow_the_users_and_a_flag_the_user_names_keeps_its_value():
    user = "--xla_dump_to=/tmp/d --xla_gpu_enable_latency_hiding_scheduler=false"
    flags = with_gpu_flags(user).split()
    assert flags[:2] == user.split()
    assert "--xla_gpu_enable_latency_hiding_scheduler=true" not in flags
    assert flags[2:] == [f for f in GPU_FLAGS if "latency_hiding" not in f]
    assert with_gpu_flags("").split() == list(GPU_FLAGS)


@pytest.mark.parametrize(
    "platforms, cuda", [("cuda,cpu", True), ("cuda", True), ("gpu", True), ("cpu", False), ("tpu,cpu", False)]
)
def test_only_a_run_on_cuda_devices_gets_them(platforms, cuda):
    assert runs_on_cuda(platforms) is cuda
    environ = {"JAX_PLATFORMS": platforms, "XLA_FLAGS": "--xla_dump_to=x"}
    use_gpu_flags(environ)
    assert environ["XLA_FLAGS"] == (with_gpu_flags("--xla_dump_to=x") if cuda else "--xla_dump_to=x")


def test_the_switch_turns_them_off():
    environ = {"JAX_PLATFORMS": "cuda", SWITCH: "off"}
    use_gpu_flags(environ)
    assert "XLA_FLAGS" not in environ


def _starts_with(xla_flags: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla_flags}
    program = "import jax; jax.numpy.zeros(1).block_until_ready()"
    return subprocess.run([sys.executable, "-c", program], env=environ, capture_output=True, text=True, timeout=120)


def test_every_flag_is_one_the_installed_xla_knows():
    assert _starts_with("--xla_gpu_no_such_flag=true").returncode != 0  # an unknown flag stops XLA
    started = _starts_with(" ".join(GPU_FLAGS))
    assert started.returncode == 0, started.stderr[-2000:]
