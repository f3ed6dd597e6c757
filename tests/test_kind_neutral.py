"""The generic code names no kind: under seqjax/training/ and seqjax/objectives/, no module
compares with, lists or looks up a model, head or objective kind by its name, and none reads a
model's config (`model.cfg.`); each asks the kind for the fact it needs instead.

The objectives' registry (`seqjax/objectives/__init__.py`), which maps each objective's name to
its code, is the one place allowed to write those names. Docstrings may name kinds.
"""

from __future__ import annotations

import ast
import pathlib

import seqjax
from seqjax.config import HEADS, MODELS, OBJECTIVES

ROOT = pathlib.Path(seqjax.__file__).parent
GENERIC = ("training", "objectives")


def _docstrings(tree: ast.AST) -> set[int]:
    bodies = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return {
        id(n.body[0].value)
        for n in bodies
        if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }


def _reads_model_cfg(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr == "cfg"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "model") or (
        isinstance(owner, ast.Attribute) and owner.attr == "model"
    )


def _registered_names(tree: ast.AST) -> set[int]:
    """The name each `REGISTRY.register("name", ...)` call gives its kind: where a kind declares itself."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    return {id(call.args[0]) for call in calls if call.func.attr == "register" and call.args}


def kind_leaks(source: str, names: set[str]) -> list[str]:
    """'line: what' for each kind name written outside a docstring and its own registration, and each
    `model.cfg` read."""
    tree = ast.parse(source)
    allowed = _docstrings(tree) | _registered_names(tree)
    leaks = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in allowed:
            leaks.append(f"{node.lineno}: {node.value!r}")
        if _reads_model_cfg(node):
            leaks.append(f"{node.lineno}: model.cfg")
    return sorted(leaks)


def test_kind_leaks_finds_a_branch_on_a_kind_name_and_a_model_config_read():
    source = (
        'def f(model):\n    """For rnn."""\n    if model.kind == "rnn":\n        return model.cfg.d_model\n'
        'MODELS.register("rnn", f)\n'
    )
    assert kind_leaks(source, {"rnn"}) == ["3: 'rnn'", "4: model.cfg"]


def test_no_generic_module_names_a_kind_or_reads_a_model_config():
    names = set(MODELS) | set(HEADS) | set(OBJECTIVES)
    leaks = {
        str(path.relative_to(ROOT)): kind_leaks(path.read_text(), names)
        for folder in GENERIC
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    assert {path: found for path, found in leaks.items() if found} == {}
