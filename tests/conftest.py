"""Test-wide setup, before jax is imported: 8 simulated CPU devices for sharding tests, and the
compile time cut by unoptimized code generation, XLA:CPU's loop emitters and unsplit modules, and
one compilation cache for the run."""

import atexit
import gc
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))  # project_scripts and tiny_runs, for the tests of every folder

# The suite's time is mostly compilation, and LLVM's optimizations are most of that; the programs
# (their HLO) are the same without them and the tests' tolerances hold either way, so the tests
# skip them: the suite runs in about 70% of the time.
# XLA reads a flag's last occurrence: an optimization level already in XLA_FLAGS wins, the
# device count does not.
# Two more flags shorten compilation and leave the computed values as they are:
# - XLA:CPU's MLIR fusion emitters take about twice as long to compile a program as its loop
#   emitters (the suite a third longer).
# - XLA:CPU splits a program's LLVM module to compile the parts in parallel; with every core
#   already busy with a worker of its own, the split only adds work: unsplit, the backend
#   compiles in about 13% less time.
# A flag XLA does not know aborts the process, so each is set only where this JAX's XLA knows it
# (asked once per run, in subprocesses; the xdist workers and the tests' subprocesses inherit the
# answer, SEQJAX_TEST_XLA_FLAGS).
COMPILE_FLAGS = ("--xla_cpu_use_fusion_emitters=false", "--xla_cpu_parallel_codegen_split_count=1")


def known_to_xla(flags: str) -> bool:
    probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.jit(lambda x: x + 1)(1.0)"],
        env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


if "SEQJAX_TEST_XLA_FLAGS" not in os.environ:
    known = COMPILE_FLAGS if known_to_xla(" ".join(COMPILE_FLAGS)) else [f for f in COMPILE_FLAGS if known_to_xla(f)]
    os.environ["SEQJAX_TEST_XLA_FLAGS"] = " ".join(known)
os.environ["XLA_FLAGS"] = " ".join(
    [
        "--xla_backend_optimization_level=0",
        os.environ["SEQJAX_TEST_XLA_FLAGS"],
        os.environ.get("XLA_FLAGS", ""),
        "--xla_force_host_platform_device_count=8",
    ]
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent compilation cache for the whole run, shared by the xdist workers (which inherit
# this environment) and the training runs the tests start as subprocesses: a program compiled
# once, such as a run's train step and the same run resumed, is not compiled again.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="seqjax-test-compilations-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


import pytest  # noqa: E402


def pytest_collection_modifyitems(items):
    """Modules with tests marked slow run first, each kept whole (its module fixtures made once):
    the long tests start while there is other work to share the workers, not at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


def pytest_collection_finish(session):
    """The imported modules and collected tests frozen out of the garbage collector's scans, and its
    young generations collected less often. Tracing and compiling leave millions of long-lived
    objects (jaxprs, cached executables' metadata), and each full collection scans them all. At
    Python's default thresholds each worker spent about 5% of its time collecting (40-45 s of
    about 910 s, measured with `gc.callbacks`); at these, one file of model tests (38 tests) spends
    0.85 s instead of 3.7 s, for the same peak memory. Cycles are still collected, later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


@pytest.fixture(autouse=True)
def _token_store_cache(tmp_path_factory, monkeypatch):
    """Each test's token stores in a fresh cache of its own, never the user's ~/.cache/seqjax."""
    monkeypatch.setenv("SEQJAX_CACHE", str(tmp_path_factory.mktemp("seqjax_cache")))
