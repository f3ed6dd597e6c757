"""The objectives benchmark (benchmarks/objectives.py) times what the training loop would run,
and its ratios are against teacher forcing."""

import sys

import pytest
from project_scripts import load_script

from seqjax import config as config_lib
from seqjax.objectives import build_objective

bench = load_script("benchmarks/objectives.py", "objectives_benchmark")


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("setup", list(bench.SETUPS))
def test_every_objective_of_every_setup_is_a_valid_config(setup, quick):
    cfg = bench.setup_config(setup, quick)
    for overrides in bench.OBJECTIVES.values():
        build_objective(config_lib.override(cfg, overrides).objective)


def test_ratios_are_throughput_over_teacher_forcing():
    seconds = {"teacher_forcing": 0.5, "gradient_penalty": 1.0}
    rows = bench.relative_rows(
        "lm", seconds, tokens=1000, steps=5, options={"teacher_forcing": "-", "gradient_penalty": "nested"}
    )
    assert rows == [
        ["lm", "teacher_forcing", "-", "100.0", "10,000", "1.00x"],
        ["lm", "gradient_penalty", "nested", "200.0", "5,000", "0.50x"],
    ]


@pytest.mark.slow
def test_quick_run_writes_a_table_with_teacher_forcing_as_baseline(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules["common"], "RESULTS", str(tmp_path))
    bench.main(["--quick", "--setups", "oracle_lm", "--objectives", "random_replacement"])
    text = (tmp_path / "objectives_quick.md").read_text()
    assert "| oracle_lm | teacher_forcing | - |" in text and "1.00x |" in text
    assert "| oracle_lm | random_replacement |" in text
