"""What the experiment sweeps share: resuming finished runs, seeds, and mean ± spread cells."""

from __future__ import annotations

import json
import os

import numpy as np

from seqjax import config as config_lib
from seqjax.config import Config


def finished_summary(run_dir: str, cfg: Config) -> dict | None:
    """The summary of a finished run of `cfg` in `run_dir`, or None if it has not finished.

    Raises:
      ValueError: `run_dir` holds a run of another config (resuming or reusing it would
        mix two experiments).
    """
    config_path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(config_path):
        return None
    with open(config_path) as f:
        saved = config_lib.from_dict(json.load(f))
    if saved != cfg:
        raise ValueError(f"{run_dir} holds a run of another config; choose another --workdir or remove it")
    summary_path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(summary_path):
        return None
    with open(summary_path) as f:
        return json.load(f)


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


def publish_table(text: str, workdir: str) -> None:
    """Prints the sweep's markdown tables and writes them to WORKDIR/table.md."""
    print("\n" + text)
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "table.md"), "w") as f:
        f.write(text)
