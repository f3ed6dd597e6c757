"""The curves of one or several runs from their `metrics.jsonl`: `seqjax plot`, and the figure a
run's experiment tracker receives at its end.

Three panels against the optimizer step: the training loss (the objective's, per target
token), the validation per-token perplexity (log scale when it spans a factor > 3), and training throughput in target
tokens per second. Each run is one colour, named in the legend by its directory. A resumed
run may log a step twice (it re-ran the steps after its last checkpoint): the later record
wins. The figure is a bare `Figure`, outside pyplot: it needs no display and no closing, and
`savefig` renders the PNG with Agg.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

from matplotlib import ticker
from matplotlib.figure import Figure

from seqjax.training.core.run_dir import RunDir

# (split, metric, panel title, y label, log scale)
PANELS = (
    ("train", "loss", "training loss", "loss (nats/token)", False),
    ("valid", "token_perplexity", "validation perplexity", "per-token perplexity", True),
    ("train", "tokens_per_sec", "throughput", "target tokens / s", False),
)
Curves = dict[tuple[str, str], tuple[list[int], list[float]]]
RENAMED = {"perplexity": "token_perplexity"}  # metric names of runs logged before the rename


def read_curves(workdir: str) -> Curves:
    """(split, metric) -> (steps, values) in step order, from `workdir`/metrics.jsonl."""
    path = RunDir(workdir).file(RunDir.METRICS)
    if not os.path.isfile(path):
        raise ValueError(f"--workdir {workdir} holds no metrics.jsonl (not a run, or one that logged nothing yet)")
    latest: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            for name, value in record.items():
                if name not in ("step", "split"):
                    latest[record["split"], RENAMED.get(name, name)][int(record["step"])] = float(value)
    return {key: (sorted(points), [points[s] for s in sorted(points)]) for key, points in latest.items()}


def run_labels(workdirs: list[str]) -> list[str]:
    """Each run's directory name, or its path where two runs share a name."""
    names = [os.path.basename(os.path.normpath(w)) for w in workdirs]
    return [name if names.count(name) == 1 else os.path.normpath(w) for name, w in zip(names, workdirs)]


def plot_runs(workdirs: list[str], output: str | None = None) -> str:
    """Draws the runs' curves into a PNG (default `metrics.png` in the first run directory);
    returns its path."""
    output = output or os.path.join(workdirs[0], "metrics.png")
    draw_runs(workdirs).savefig(output, dpi=110)
    return output


def draw_runs(workdirs: list[str]) -> Figure:
    """The runs' curves: one axes per panel of `PANELS` in order, one line per run with data in each."""
    curves = [read_curves(w) for w in workdirs]
    figure = Figure(figsize=(5.2 * len(PANELS), 4.2), layout="constrained")
    axes = figure.subplots(1, len(PANELS))
    handles = []
    for run, label in zip(curves, run_labels(workdirs)):
        colour = None
        for ax, (split, metric, _, _, _) in zip(axes, PANELS):
            steps, values = run.get((split, metric), ([], []))
            if steps:
                marker = "o" if len(steps) < 20 else None  # a few evaluations: show the points
                (line,) = ax.plot(steps, values, marker=marker, markersize=4, color=colour, label=label)
                if colour is None:
                    colour = line.get_color()
                    handles.append(line)
    for ax, (_, _, title, ylabel, log) in zip(axes, PANELS):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        low, high = ax.dataLim.intervaly
        if log and ax.has_data() and low > 0 and high / low > 3:  # a narrow range reads better on a linear axis
            ax.set_yscale("log")
            plain = ticker.FuncFormatter(lambda value, _: f"{value:g}")  # 20, not 2 × 10¹
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
    figure.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 4) or 1)
    return figure
