"""benchmarks/common.py's round-robin timing, against a fake clock: the untimed calls that
open each turn run right before their candidate and are left out of its time."""

import types

import pytest
from project_scripts import load_script

common = load_script("benchmarks/common.py", "benchmark_common")


@pytest.fixture
def fake_calls(monkeypatch):
    """(log of call names, make(name, seconds) -> a call that logs its name and advances a fake
    clock, the one `interleaved` reads, by `seconds`)."""
    clock = {"now": 0.0}
    log: list[str] = []
    monkeypatch.setattr(common, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))

    def make(name, seconds):
        def run():
            log.append(name)
            clock["now"] += seconds

        return run

    return log, make


def test_each_turn_runs_its_untimed_call_first_and_times_only_the_candidate(fake_calls):
    log, make = fake_calls
    seconds = common.interleaved(
        {"a": make("a", 1.0), "b": make("b", 2.0)},
        repeats=3,
        before={"a": make("warm a", 100.0), "b": make("warm b", 100.0)},
    )
    assert seconds == {"a": 1.0, "b": 2.0}
    assert log == ["warm a", "a", "warm b", "b"] * 3


def test_without_untimed_calls_the_candidates_alternate_alone(fake_calls):
    log, make = fake_calls
    assert common.interleaved({"a": make("a", 1.0), "b": make("b", 3.0)}, repeats=2) == {"a": 1.0, "b": 3.0}
    assert log == ["a", "b", "a", "b"]
