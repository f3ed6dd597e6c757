"""The config a `--config FILE` gives: an experiment file's `get_config()`, the TOML that `seqjax
config` prints (`text.from_toml`), or a run's `config.json` (an imported model's, say, to fine-tune
it); and the reading of a run's `config.json` that every command loading a run goes through.

An experiment file is Python run as it is, so what goes wrong in it (a syntax error, an exception
at import or in `get_config()`) is refused in one line naming the file, the line and the error,
like any other bad input.
"""

from __future__ import annotations

import importlib.util
import json
import os
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from seqjax.config.saved import from_dict
from seqjax.config.sections import Config
from seqjax.config.text import from_toml

T = TypeVar("T")
FORMS = (
    "an experiment file defining get_config() (.py), a TOML config as `seqjax config` prints (.toml), "
    "or a run's config.json"
)


def load_config(path: str | None) -> tuple[Config, str]:
    """The config in `path` and its name (the file's, or the run directory's for a config.json);
    no file: the defaults, named "default".

    Raises:
      ValueError: a missing file or one of no known form, or anything wrong in it (one line naming
        the file, and for Python the line and the error).
    """
    if path is None:
        return Config(), "default"
    if os.path.isdir(path):
        raise ValueError(f"--config must be a file ({FORMS}), got {path!r}, which is a directory")
    if not os.path.isfile(path):
        raise ValueError(f"--config file does not exist: {path}")
    name = os.path.splitext(os.path.basename(path))[0]
    if path.endswith(".json"):
        return read_run_config(path, f"--config {path}"), os.path.basename(os.path.dirname(os.path.abspath(path)))
    if path.endswith(".toml"):
        return _toml_config(path), name
    if not path.endswith(".py"):
        raise ValueError(f"--config {path} is none of {FORMS}")
    module = _run(path, lambda: _experiment_module(path))
    if not hasattr(module, "get_config"):
        raise ValueError(f"--config file {path} must define get_config() -> seqjax.config.Config")
    cfg = _run(path, module.get_config)
    if not isinstance(cfg, Config):
        raise ValueError(f"get_config() in {path} must return seqjax.config.Config, got {type(cfg).__name__}")
    return cfg, name


def read_run_config(path: str, given: str) -> Config:
    """The config a run saved in its `config.json` at `path`; `given` names where the user gave it.

    Raises:
      ValueError: the file is not JSON, or it is a Hugging Face checkpoint's (it has `model_type`),
        which is to be imported as a run first.
    """
    with open(path, encoding="utf-8") as file:
        try:
            values = json.load(file)
        except ValueError as error:  # not JSON, or not UTF-8
            raise ValueError(f"{given}: {path} is not a run's config.json: {error}") from None
    if isinstance(values, dict) and "model_type" in values:
        workdir = os.path.dirname(path) or "."
        raise ValueError(
            f"{given} looks like a Hugging Face checkpoint (config.json with model_type={values['model_type']!r}), "
            f"not a seqjax run: make it one with `seqjax import-hf {workdir} --workdir RUN`, then give RUN"
        )
    return from_dict(values)


def _toml_config(path: str) -> Config:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except UnicodeDecodeError as error:
        raise ValueError(f"--config {path} must be UTF-8 text: {error}") from None
    try:
        return from_toml(text)
    except ValueError as error:
        raise ValueError(f"--config {path}: {error}") from None


def _experiment_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("seqjax_experiment", path)
    assert spec is not None and spec.loader is not None  # a .py path always has a source loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(path: str, call: Callable[[], T]) -> T:
    """call(), an exception raised in the experiment file `path` (or by what it calls) refused as
    one line naming where in the file it happened."""
    try:
        return call()
    except Exception as error:  # the user's code may raise anything
        raise ValueError(f"--config {where(path, error)}: {type(error).__name__}: {error_text(error)}") from None


def where(path: str, error: BaseException) -> str:
    """`FILE, line N` of `error`: a syntax error's own file and line, else the last line of the
    experiment file `path` that the traceback passes through (the call into a library, say)."""
    target = os.path.abspath(path)
    if isinstance(error, SyntaxError) and error.lineno is not None:
        elsewhere = error.filename and os.path.abspath(error.filename) != target  # a module it imports
        return f"{error.filename if elsewhere else path}, line {error.lineno}"
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if os.path.abspath(f.filename) == target]
    return f"{path}, line {lines[-1]}" if lines else path


def error_text(error: BaseException) -> str:
    """The error's message; a syntax error's with the text of the line it points at."""
    if isinstance(error, SyntaxError):
        text = (error.text or "").strip()
        return f"{error.msg}: {text}" if text else str(error.msg)
    return str(error)
