"""benchmarks/mfu.py: the FLOP count against a hand count, the throughput and MFU figures
against a fake clock, and the argument checks (a real quick run: test_bench.py)."""

import types

import pytest
from project_scripts import load_script

from seqjax.config import ModelConfig

bench = load_script("benchmarks/mfu.py", "mfu_benchmark")

# D = 2, F = 4, one layer, T = 3 positions, V = 5 words, batches of B = 2 rows.
TINY = bench.LMShapes(
    2, 3, 5, ModelConfig(kind="transformer", d_model=2, layers=1, num_heads=1, d_ff=4, dropout=0.0, max_len=3)
)
# Forward multiply-adds per token, 2 FLOPs each: Q, K, V and output projections 4 · D·D = 16,
# the MLP D·F + F·D = 16, the output layer D·V = 10, attention scores over T keys T·D = 6 and
# the weighted sum of T values T·D = 6: 54 multiply-adds, 108 FLOPs. Backward costs twice the
# forward: 324 FLOPs per trained token.
TINY_TRAIN_FLOPS_PER_TOKEN = 324


def test_flops_per_token_of_a_tiny_transformer_is_the_hand_count():
    assert bench.train_flops_per_token(TINY) == TINY_TRAIN_FLOPS_PER_TOKEN


def test_measure_reports_the_median_timed_step_and_the_throughput_it_implies(monkeypatch):
    """A fake step runner advances a fake clock: the untimed warm-up call takes 100 s, the three
    timed calls of 2 steps take 0.2, 0.4 and 0.25 s per step, so the median step is 0.25 s."""
    clock = types.SimpleNamespace(now=0.0, per_step=iter([50.0, 0.2, 0.4, 0.25]))

    def fake_lm_train_step(shapes, dtype):
        def run(steps):
            clock.now += steps * next(clock.per_step)

        return run, 1234

    monkeypatch.setattr(bench, "lm_train_step", fake_lm_train_step)
    monkeypatch.setattr(bench, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    result = bench.measure(TINY, "float32", repeats=3, steps=2)
    # B · T = 6 tokens per 0.25 s step: 24 tokens/s, times 324 FLOPs each: 7,776 FLOP/s.
    assert result == pytest.approx({"params": 1234, "step_s": 0.25, "tokens_per_s": 24.0, "model_tflops": 7.776e-9})


def test_report_shows_mfu_against_each_peak():
    result = {"params": 1234, "step_s": 0.25, "tokens_per_s": 24.0, "model_tflops": 0.5}
    text = bench.report(TINY, "float32", result, measured_peak=2.0, nominal_peak=0.8)
    row = next(line for line in text.splitlines() if line.startswith("| B=2 T=3"))
    assert [cell.strip() for cell in row.strip("|").split("|")][1:] == [
        "1,234",
        "float32",
        "250.0",
        "24",
        "0.50",
        "25%",
        "62%",
    ]


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--steps", "0"], ["--peak-tflops", "-1"]])
def test_bad_arguments_are_refused_before_any_work(argv):
    with pytest.raises(ValueError, match=argv[0]):
        bench.main(["--quick", *argv])
