"""Imports a script of the project (benchmarks/, experiments/) as a module, for testing its parts."""

import importlib.util
import pathlib
import sys
from types import ModuleType

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_script(relative_path: str, name: str) -> ModuleType:
    """The module of ROOT/relative_path, registered as `name` (dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
