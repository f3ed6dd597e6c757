"""Test-wide setup: 8 simulated CPU devices (set before jax is imported) for sharding tests."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # project_scripts, for the tests of benchmarks and experiments

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _token_store_cache(tmp_path_factory, monkeypatch):
    """Each test's token stores in a fresh cache of its own, never the user's ~/.cache/seqjax."""
    monkeypatch.setenv("SEQJAX_CACHE", str(tmp_path_factory.mktemp("seqjax_cache")))
