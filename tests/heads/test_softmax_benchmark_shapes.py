"""The softmax GPU benchmark and its estimate read one set of shape arguments
(benchmarks/softmax_cases.py, `Shapes`), and the GPU benchmark's matmul rate is its FLOPs over the
median call that `interleaved` times."""

import argparse

import pytest
from project_scripts import load_script

cases = load_script("benchmarks/softmax_cases.py", "softmax_benchmark_cases")
gpu = load_script("benchmarks/softmax_gpu.py", "softmax_benchmark_gpu")


def test_shape_arguments_default_to_the_gpu_benchmarks_shapes_and_set_each_field():
    parser = argparse.ArgumentParser()
    cases.Shapes.add_arguments(parser)
    assert cases.Shapes.parsed(parser.parse_args([])) == cases.Shapes(rows=16384, features=1024, samples=1024)
    given = parser.parse_args(["--rows", "3", "--features", "5", "--samples", "7"])
    assert cases.Shapes.parsed(given) == cases.Shapes(rows=3, features=5, samples=7)


def test_the_matmul_rate_is_two_flops_per_multiply_add_over_the_median_call(monkeypatch):
    timed = {}

    def median_seconds(calls, repeats, *, warm_up):
        (call,) = calls.values()
        timed.update(product=call(), repeats=repeats, warm_up=warm_up)
        return {name: 0.5 for name in calls}

    monkeypatch.setattr(gpu, "interleaved", median_seconds)
    assert gpu.matmul_rate(None, size=64, repeats=3) == pytest.approx(2 * 64**3 / 0.5 / 1e12)
    assert timed["product"].shape == (64, 64) and timed["repeats"] == 3 and timed["warm_up"]
