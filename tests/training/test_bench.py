"""`seqjax bench NAME`: a benchmark of benchmarks/ run through the command line."""

import importlib
import sys

import pytest
from project_scripts import ROOT

from seqjax.cli import main
from seqjax.cli.tools import benchmarks_folder


@pytest.mark.slow
def test_bench_runs_a_benchmark_with_its_arguments_and_it_writes_its_table(tmp_path, monkeypatch, capsys):
    """`seqjax bench mfu --quick`: the tiny measurement, its table written where the
    benchmarks' `common.RESULTS` points (here a temporary directory, not benchmarks/results)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setattr(importlib.import_module("common"), "RESULTS", str(tmp_path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the command hands the benchmark its own argv
    assert main(["bench", "mfu", "--quick", "--repeats", "1"]) == 0
    table = (tmp_path / "mfu_quick.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| B=4 T=32 D=64 L=2"))
    assert row.count("|") == 9 and "%" in row  # shape, parameters, matmuls, ms, tokens/s, TFLOP/s, 2 MFUs
    assert f"wrote {tmp_path / 'mfu_quick.md'}" in capsys.readouterr().out


def test_an_unknown_benchmark_is_refused_listing_the_available_ones(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["bench", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'nosuch'" in err and "'mfu'" in err


def test_bench_finds_the_benchmarks_of_the_repository_it_is_run_inside(tmp_path, monkeypatch, capsys):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "hello.py").write_text("import sys\nprint('hello', sys.argv[1:])\n")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "deep" / "er")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert main(["bench", "hello", "--x"]) == 0
    assert capsys.readouterr().out == "hello ['--x']\n"


def test_bench_outside_a_repository_with_benchmarks_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "mfu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"neither {tmp_path} nor a folder above it holds one" in err


def test_the_benchmarks_folder_is_the_nearest_one_above(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "a" / "benchmarks").mkdir(parents=True)
    (tmp_path / "a" / "b").mkdir()
    assert benchmarks_folder(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "benchmarks")
