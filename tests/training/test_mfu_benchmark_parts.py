"""benchmarks/mfu.py: the FLOP count, argument checks and one tiny measured run."""

import math

import pytest
from project_scripts import load_script

bench = load_script("benchmarks/mfu.py", "mfu_benchmark")


def test_flops_per_token_is_the_palm_count_written_out():
    d, f, layers, t, v = 64, 256, 2, 32, 512  # the quick shapes
    per_layer = 4 * d * d + 2 * d * f
    expected = 6 * (layers * per_layer + d * v) + 12 * layers * t * d
    assert bench.train_flops_per_token(bench.QUICK) == expected


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--steps", "0"], ["--peak-tflops", "-1"]])
def test_bad_arguments_are_refused_before_any_work(argv):
    with pytest.raises(ValueError, match=argv[0]):
        bench.main(["--quick", *argv])


def test_quick_measurement_reports_consistent_figures():
    result = bench.measure(bench.QUICK, "bfloat16", repeats=1, steps=1)
    tokens = bench.QUICK.batch * bench.QUICK.time
    assert result["params"] > 0 and result["step_s"] > 0
    assert math.isclose(result["tokens_per_s"], tokens / result["step_s"])
    assert math.isclose(result["model_tflops"], result["tokens_per_s"] * bench.train_flops_per_token(bench.QUICK) / 1e12)
    text = bench.report(bench.QUICK, "bfloat16", result, measured_peak=1.0, nominal_peak=2.0)
    assert f"{result['params']:,}" in text and "MFU (nominal peak)" in text
