"""`seqjax train | prepare | config`: a run trained, its corpus tokenized, its config shown."""

from __future__ import annotations

import argparse
import os
from typing import Any

from seqjax import config as config_lib
from seqjax.cli.arguments import add_config_arguments, command
from seqjax.config import text as config_text
from seqjax.config.files import load_config

DEFAULT_WORKDIR = "runs"


def cmd_train(args: argparse.Namespace) -> None:
    """train (or resume) a run; no arguments: the default experiment"""
    from seqjax.training.loop import train

    cfg, name = load_config(args.config)
    cfg = config_lib.override(cfg, args.set)
    train(cfg, args.workdir or os.path.join(DEFAULT_WORKDIR, name), extend_schedule=args.extend_schedule)


def cmd_prepare(args: argparse.Namespace) -> None:
    """tokenize a text or parallel corpus once into its token store (data.store) and print where"""
    from seqjax.data.store.prepare import describe_store, ensure_store

    cfg, _ = load_config(args.config)
    data = config_lib.override(cfg, args.set).data
    print(describe_store(ensure_store(data), data))


def cmd_config(args: argparse.Namespace) -> None:
    """print the resolved config, TOML: each key's type, default and description"""
    cfg, _ = load_config(args.config)
    print(config_text.to_toml(config_lib.override(cfg, args.set)), end="")


def add_commands(sub: Any) -> None:
    t = command(
        sub,
        cmd_train,
        "train",
        epilog="config keys, name: type = default (`seqjax config` describes each one):\n" + config_text.reference(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arguments(t)
    t.add_argument("--workdir", help=f"run directory (default {DEFAULT_WORKDIR}/<config name>)")
    t.add_argument(
        "--extend-schedule",
        action="store_true",
        help="resume although train.steps or the learning-rate schedule (optim.learning_rate, schedule, "
        "warmup_steps, end_lr_fraction) changed: go on from the checkpoint under the new schedule",
    )
    add_config_arguments(command(sub, cmd_prepare, "prepare"))
    add_config_arguments(command(sub, cmd_config, "config"))
