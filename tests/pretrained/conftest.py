"""Runs imported once per fixture checkpoint (tests/pretrained/fixtures, written by
benchmarks/hf_fixtures.py), shared by the tests of this folder."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from pretrained_helpers import FIXTURES  # noqa: E402

from seqjax.pretrained import import_checkpoint  # noqa: E402


@pytest.fixture(scope="session")
def imported(tmp_path_factory):
    """imported(name) -> the run directory of fixture `name`, imported on first use."""
    runs = {}

    def run(name: str):
        if name not in runs:
            runs[name] = tmp_path_factory.mktemp(f"imported_{name}") / "run"
            import_checkpoint(str(FIXTURES / name), str(runs[name]), echo=lambda _: None)
        return runs[name]

    return run
