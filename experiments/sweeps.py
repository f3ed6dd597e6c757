"""What the experiment sweeps share: training or resuming runs, parsing flags, mean ± spread cells,
and publishing a sweep's tables with its summary under experiments/results/ (`publish`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Collection
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summaries  # noqa: E402

from seqjax.config import Config  # noqa: E402
from seqjax.training.core.run_dir import RunDir  # noqa: E402


def finished_summary(run_dir: str, cfg: Config) -> dict[str, Any] | None:
    """The summary of a finished run of `cfg` in `run_dir`, or None if it has not finished.

    Raises:
      ValueError: `run_dir` holds a run of another config (resuming or reusing it would
        mix two experiments).
    """
    if not os.path.isfile(os.path.join(run_dir, "config.json")):
        return None
    saved = RunDir(run_dir).config
    if saved != cfg:
        raise ValueError(f"{run_dir} holds a run of another config; choose another --workdir or remove it")
    summary_path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(summary_path):
        return None
    with open(summary_path) as f:
        summary: dict[str, Any] = json.load(f)
    return summary


def trained_summary(cfg: Config, run_dir: str, label: str) -> dict[str, Any]:
    """The summary of the run of `cfg` in `run_dir`, training it first (or resuming it from its
    last checkpoint) unless it has finished; a newly trained run's wall time and the machine that
    trained it (with its load average at the end) go to its train_seconds.json."""
    from seqjax.training.loop import train

    summary = finished_summary(run_dir, cfg)
    if summary is not None:
        print(f"== {label}: finished before, read from {run_dir}", flush=True)
        return summary
    start = time.perf_counter()
    summary = train(cfg, run_dir)
    seconds = time.perf_counter() - start
    with open(os.path.join(run_dir, "train_seconds.json"), "w") as f:
        json.dump({"seconds": seconds, "machine": summaries.machine()}, f)
    print(f"== {label}: {seconds:.0f} s", flush=True)
    return summary


def add_grid_arguments(parser: argparse.ArgumentParser, name: str, variants: Collection[str], seeds_help: str) -> None:
    """The flags of a sweep over variants × seeds: --workdir-root (default runs/NAME), --variants, --seeds."""
    parser.add_argument("--workdir-root", default=os.path.join("runs", name))
    parser.add_argument("--variants", default=",".join(variants))
    parser.add_argument("--seeds", default="0,1,2", help=f"{seeds_help}, comma-separated")


def parse_names(text: str, known: Collection[str], flag: str) -> list[str]:
    """The comma-separated names of `text`, each one of `known`; a clear error otherwise."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or any(n not in known for n in names):
        raise ValueError(f"{flag} must be a comma list of {', '.join(known)}, got {text!r}")
    return names


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds must be distinct ints >= 0 separated by commas, got {text!r}")
    return seeds


def mean_and_half_range(values: list[float]) -> tuple[float, float]:
    """(mean, (max − min) / 2); for two seeds the half range is their population std."""
    if not values:
        raise ValueError("need at least one value")
    return float(np.mean(values)), (max(values) - min(values)) / 2


def format_cell(values: list[float], digits: int = 3, percent: bool = False) -> str:
    """'mean ± half range' of `values` (just the mean for one value), as percent if `percent`."""
    mean, spread = mean_and_half_range(values)
    scale, unit = (100.0, "%") if percent else (1.0, "")
    if len(values) == 1:
        return f"{mean * scale:.{digits}f}{unit}"
    return f"{mean * scale:.{digits}f} ± {spread * scale:.{digits}f}{unit}"


def table_text(lines: list[str], missing: list[str]) -> str:
    """The markdown `lines` as one text, the runs in `missing` named under them as not finished."""
    if missing:
        lines = [*lines, f"\nnot finished: {', '.join(missing)}"]
    return "\n".join(lines) + "\n"


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    """--results-dir: where the sweep's summary goes (default experiments/results; a --quick
    smoke test's goes to its workdir instead, never over a published summary)."""
    parser.add_argument("--results-dir", default=None, help="where NAME.json and NAME.md go (experiments/results)")


def results_dir(flag: str | None, workdir: str, quick: bool = False) -> str:
    """The --results-dir given, else WORKDIR for a --quick run, else experiments/results."""
    if flag:
        return flag
    return workdir if quick else summaries.RESULTS_DIR


def publish(name: str, text: str, workdir: str, run_dirs: list[str], figures: Any, results: str) -> None:
    """Prints the sweep's markdown tables, writes them to WORKDIR/table.md, and writes the summary
    RESULTS/NAME.json and NAME.md (`summaries.write_summary`) with a record of each finished run in
    `run_dirs` (named by its path under `workdir`, or as given when outside it) and `figures`, the
    numbers of the tables."""
    print("\n" + text)
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "table.md"), "w") as f:
        f.write(text)
    names = [os.path.relpath(d, workdir) for d in run_dirs]
    records = [summaries.run_record(d, n if not n.startswith("..") else d) for d, n in zip(run_dirs, names)]
    for path in summaries.write_summary(name, text, records, figures, results):
        print("wrote", summaries.portable(path))
