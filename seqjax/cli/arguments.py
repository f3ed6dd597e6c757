"""The arguments several commands share (`--config`, `--set`) and the way a command is added: its
function's docstring is its help."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from seqjax.config.files import FORMS


def add_overrides(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="KEY=VALUE", help=help)


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help=FORMS)
    add_overrides(p, "config overrides, e.g. train.steps=200")


def command(
    sub: Any, func: Callable[[argparse.Namespace], object], name: str, **kwargs: Any
) -> argparse.ArgumentParser:
    """The subcommand `name`, run by `func`, whose docstring is its help."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=func.__doc__, **kwargs)
    p.set_defaults(func=func)
    return p
