"""`seqjax plot | bench`: runs' curves drawn, and a benchmark of the repository run."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from seqjax.cli.arguments import command


def cmd_plot(args: argparse.Namespace) -> None:
    """training loss, validation perplexity and tokens/s against steps"""
    from seqjax.training.core.curves import plot_runs

    print(f"wrote {plot_runs(args.workdir, args.output)}")


def benchmarks_folder(start: str) -> str:
    """The `benchmarks/` folder of the repository that holds `start`: the nearest one in `start` or a
    folder above it. Raises ValueError when there is none."""
    folder = os.path.abspath(start)
    while not os.path.isdir(os.path.join(folder, "benchmarks")):
        parent = os.path.dirname(folder)
        if parent == folder:
            raise ValueError(
                f"seqjax bench runs a repository's benchmarks/, but neither {os.path.abspath(start)} nor a folder "
                "above it holds one: run it from inside the seqjax repository"
            )
        folder = parent
    return os.path.join(folder, "benchmarks")


def cmd_bench(args: argparse.Namespace) -> None:
    """run a benchmark from benchmarks/ (e.g. softmax, lm_train)"""
    import runpy

    root = benchmarks_folder(os.getcwd())
    path = os.path.join(root, f"{args.name}.py")
    if not os.path.isfile(path):
        available = sorted(f[:-3] for f in os.listdir(root) if f.endswith(".py"))
        raise ValueError(f"unknown benchmark {args.name!r}; available: {available}")
    sys.argv = [path, *args.rest]
    runpy.run_path(path, run_name="__main__")


def add_plot(sub: Any) -> None:
    pl = command(sub, cmd_plot, "plot")
    pl.add_argument("--workdir", nargs="+", required=True, metavar="DIR", help="one or more run directories")
    pl.add_argument("--output", metavar="FILE.png", help="default: metrics.png in the first run directory")


def add_bench(sub: Any) -> None:
    b = command(sub, cmd_bench, "bench")
    b.add_argument("name")
    b.add_argument("rest", nargs=argparse.REMAINDER)
