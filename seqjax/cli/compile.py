"""`seqjax compile`: a run's steps compiled for a GPU or TPU target on this machine's CPU, and the report."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from seqjax import config as config_lib
from seqjax.cli.arguments import add_config_arguments, command
from seqjax.config.files import load_config


def cmd_compile(args: argparse.Namespace) -> int:
    """compile the run's train, eval and decode steps for a GPU or TPU target without one: memory per device
    (fits?), attention kernel, collectives, FLOPs, step time and MFU (estimated on a calibrated GPU, else bounded)"""
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    target = parse_target(args.target, args.slices)
    use_target_compiler()  # before anything starts a JAX backend
    from jax.errors import JaxRuntimeError

    from seqjax.accelerators import report as report_lib

    cfg, _ = load_config(args.config)
    cfg = config_lib.override(cfg, args.set)
    print(f"compiling for {target.describe()} on this machine's CPU", file=sys.stderr)
    try:
        report = report_lib.compile_report(cfg, target, args.vocab_size, echo=lambda m: print(m, file=sys.stderr))
    except JaxRuntimeError as err:
        first = next((line for line in str(err).splitlines() if line.strip()), str(err))
        raise ValueError(f"the compiler for {target.name} refused this run: {first}") from None
    print(report_lib.describe(report))
    if args.json:
        report_lib.write_json(args.json, report)
    problems = report_lib.problems(report)
    for problem in problems:
        print(f"seqjax: {problem}", file=sys.stderr)
    return 1 if problems else 0


def add_commands(sub: Any) -> None:
    co = command(sub, cmd_compile, "compile")
    co.add_argument("--target", required=True, help="h100:8, h200:8, a100:8 (GPUs) or v5e:2x2, v5p:4x4x4 (TPU)")
    co.add_argument("--slices", type=int, default=1, help="TPU slices joined by the data-center network")
    co.add_argument(
        "--vocab-size", type=int, help="read no data: a vocabulary of this size (Zipfian counts for the tree heads)"
    )
    co.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    add_config_arguments(co)
