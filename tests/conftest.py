"""Test-wide setup, before jax is imported: 8 simulated CPU devices for sharding tests, and the
compile time cut by unoptimized code generation and one compilation cache for the run."""

import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))  # project_scripts, for the tests of benchmarks and experiments

# The suite's time is mostly compilation, and LLVM's optimizations are most of that; the programs
# (their HLO) are the same without them and the tests' tolerances hold either way, so the tests
# skip them: the suite runs in about 70% of the time.
# XLA reads a flag's last occurrence: an optimization level already in XLA_FLAGS wins, the
# device count does not.
os.environ["XLA_FLAGS"] = " ".join(
    ["--xla_backend_optimization_level=0", os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=8"]
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


@pytest.fixture(autouse=True)
def _token_store_cache(tmp_path_factory, monkeypatch):
    """Each test's token stores in a fresh cache of its own, never the user's ~/.cache/seqjax."""
    monkeypatch.setenv("SEQJAX_CACHE", str(tmp_path_factory.mktemp("seqjax_cache")))
