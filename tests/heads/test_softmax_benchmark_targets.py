"""The softmax benchmark's target lines (benchmarks/softmax_targets.py): each verdict turns at its
threshold, is read from the per-run values, and the V the targets are checked at is the one named."""

import pytest
from project_scripts import load_script

targets = load_script("benchmarks/softmax_targets.py", "softmax_benchmark_targets")
SHAPES = targets.Shapes(rows=64, features=16, samples=32)
V = 1_000


def measured(seconds: dict[str, list[float]]):
    """Results and per-run values at V of cases whose runs took `seconds`."""
    row = {name: (sorted(runs)[len(runs) // 2], 2**20, 2**10, "") for name, runs in seconds.items()}
    return {V: row}, {V: seconds}


def line(lines: list[str], start: str) -> str:
    (found,) = [text for text in lines if text.startswith(start)]
    return found


@pytest.mark.parametrize("share, verdict", [(0.79, "**missed**"), (0.81, "met")])
def test_the_full_softmax_share_of_the_peak_timed_beside_it_turns_at_80_percent(share, verdict):
    flops = 6.0 * SHAPES.rows * SHAPES.features * V
    peak_seconds = 2.0 * targets.PEAK_SIZE**3 / 1e9 / 50.0  # 50 GFLOP/s in every run
    full = flops / 1e9 / (share * 50.0)
    results, per_run = measured({"full": [full] * 3, targets.PEAK: [peak_seconds] * 3})
    got = line(targets.target_checks(results, per_run, peak=999.0, shapes=SHAPES), "- full softmax >= 80%")
    assert f"{share:.0%}" in got and got.endswith(f"({verdict}) (the peak timed with it: 50, 50, 50 GFLOP/s)")


def test_a_speedup_is_the_median_of_the_per_run_ratios_not_the_ratio_of_the_medians():
    # Per run full / class: 12, 8, 11 -> median 11 (met); the medians' ratio would be 10 / 1 = 10.
    results, per_run = measured({"full": [12.0, 8.0, 11.0], "class (sqrt V classes)": [1.0, 1.0, 1.0]})
    got = line(targets.target_checks(results, per_run, 100.0, SHAPES), "- class (sqrt V classes)")
    assert got == "- class (sqrt V classes) >= 10x faster than full: 11.0x [12.0x, 8.0x, 11.0x] (met)"


def test_optax_must_take_1_3_times_the_full_softmax():
    results, per_run = measured({"full": [1.0] * 3, "optax cross-entropy": [1.29] * 3})
    got = line(targets.target_checks(results, per_run, 100.0, SHAPES), "- full softmax >= 1.3x optax")
    assert got.endswith("1.29x [1.29x, 1.29x, 1.29x] (**missed**)")


def test_the_slope_of_the_row_cases_is_read_between_the_smallest_and_largest_v():
    name = targets.SAMPLED_ROWS
    results = {1_000: {"full": (1.0, None, None, ""), name: (0.010, None, None, "")}}
    results[100_000] = {"full": (1.0, None, None, ""), name: (0.010 * 100**0.25, None, None, "")}
    per_run = {v: {"full": [1.0]} for v in results}
    got = line(targets.target_checks(results, per_run, 100.0, SHAPES), f"- {name}: log-log slope")
    assert got.endswith("1,000 -> 100,000 <= 0.2: 0.25 (**missed**)")


def test_targets_are_checked_at_100k_where_it_was_measured_else_at_the_largest_v():
    assert targets.target_vocab([10_000, 100_000, 1_000_000]) == 100_000
    assert targets.target_vocab([1_000, 10_000]) == 10_000
