"""Huge pages for the host heap: XLA's per-execution temporaries fault in a few huge pages
instead of every 4 KiB page, and `seqjax` restarts itself with the tunable where it applies."""

import os
import platform
import statistics
import subprocess
import sys

import pytest

from seqjax import cli
from seqjax.training.core import host_heap
from seqjax.training.core.host_heap import TUNABLE, huge_page_environment, thp_mode

APPLIES = sys.platform.startswith("linux") and huge_page_environment({}, platform.libc_ver(), thp_mode()) is not None

# A jitted gradient whose backward keeps three [2048, 4096] float32 activations: 96 MiB of
# temporaries in each execution, freed when it ends, and a scalar output.
PROBE = """
import resource
import jax, jax.numpy as jnp
grad = jax.jit(jax.grad(lambda w, x: jnp.sum(jnp.sin(x * w) * jnp.cos(x * w) * jnp.tanh(x * w))))
x, w = jnp.ones((2048, 4096)), jnp.float32(0.5)
for _ in range(8):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    grad(w, x).block_until_ready()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
TEMPORARY_PAGES = 3 * 2048 * 4096 * 4 // 4096


def page_faults_per_call(environ):
    """Median page faults of a call after the first, in a process started with `environ`."""
    out = subprocess.run([sys.executable, "-c", PROBE], env=environ, capture_output=True, text=True, check=True)
    return statistics.median(int(f) for f in out.stdout.split()[1:])


@pytest.mark.skipif(not APPLIES, reason="needs Linux, glibc >= 2.35 and transparent huge pages in madvise mode")
def test_the_tunable_spares_each_execution_the_page_faults_of_its_temporaries():
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    assert page_faults_per_call(plain) >= 0.9 * TEMPORARY_PAGES  # every 4 KiB page, at every call
    assert page_faults_per_call(huge_page_environment(plain, platform.libc_ver(), "madvise")) <= 0.05 * TEMPORARY_PAGES


@pytest.mark.skipif(not APPLIES, reason="needs Linux, glibc >= 2.35 and transparent huge pages in madvise mode")
def test_restart_runs_the_same_command_again_under_the_tunable_once():
    code = (
        "from seqjax.training.core.host_heap import restart_with_huge_pages as r; r(); "
        "import os; print(os.getpid(), os.environ['GLIBC_TUNABLES'])"
    )
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    first = subprocess.Popen([sys.executable, "-c", code], env=plain, stdout=subprocess.PIPE, text=True)
    out, _ = first.communicate()
    pid, tunables = out.split()
    assert (int(pid), tunables) == (first.pid, TUNABLE)  # one line: restarted once, in place


def test_environment_appends_the_tunable_and_respects_the_users():
    assert huge_page_environment({"A": "1"}, ("glibc", "2.36"), "madvise") == {"A": "1", "GLIBC_TUNABLES": TUNABLE}
    ours = huge_page_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, ("glibc", "2.39"), "madvise")
    assert ours["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:" + TUNABLE
    for environ, libc, mode in [
        ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, ("glibc", "2.36"), "madvise"),  # the user's choice
        ({}, ("glibc", "2.34"), "madvise"),  # no such tunable
        ({}, ("", ""), "madvise"),  # not glibc
        ({}, ("glibc", "2.36"), "always"),
        ({}, ("glibc", "2.36"), "never"),
        ({}, ("glibc", "2.36"), None),
    ]:
        assert huge_page_environment(environ, libc, mode) is None


def test_thp_mode_reads_the_bracketed_word(tmp_path):
    path = tmp_path / "enabled"
    path.write_text("always [madvise] never\n")
    assert thp_mode(str(path)) == "madvise"
    assert thp_mode(str(tmp_path / "missing")) is None


def test_the_executable_restarts_before_it_runs_a_command(monkeypatch):
    calls = []
    monkeypatch.setattr(host_heap, "restart_with_huge_pages", lambda: calls.append("restart"))
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 0)
    assert cli.entry() == 0
    assert calls == ["restart", "main"]
