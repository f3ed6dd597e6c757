"""The generic code names no kind: under seqjax/training/, objectives/, decoding/, accelerators/
and in cli/, no module compares with, lists or looks up a model, head or objective kind by its
name, none reads a model's config (`model.cfg.`), and none imports a kind's own module (one that
registers a kind) but an objective its fellow objectives'; each asks the kind, through the
registries and the contracts, for what it needs instead.

A kind's name is written only where the kind registers itself. Docstrings may name kinds.
"""

from __future__ import annotations

import ast
import pathlib

import seqjax
from seqjax.config import HEADS, MODELS, OBJECTIVES

ROOT = pathlib.Path(seqjax.__file__).parent
GENERIC = ("training", "objectives", "decoding", "accelerators", "cli")
REGISTRIES = {"MODELS", "HEADS", "OBJECTIVES", "ATTENTION_KERNELS", "OPTIMIZERS", "DATA_FORMATS"}


def _generic_files() -> list[pathlib.Path]:
    return [path for name in GENERIC for path in sorted((ROOT / name).rglob("*.py")) or [ROOT / name]]


def _module(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")


def registers_a_kind(source: str) -> bool:
    """Whether the module declares a kind: it calls `register` on one of the registries."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "register"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id in REGISTRIES
        for n in ast.walk(ast.parse(source))
    )


def imported_modules(source: str) -> set[str]:
    """The modules `source` imports by absolute name, and `module.name` for each `from module import name`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


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
    leaks = {str(path.relative_to(ROOT)): kind_leaks(path.read_text(), names) for path in _generic_files()}
    assert {path: found for path, found in leaks.items() if found} == {}


def test_the_import_check_finds_a_kind_module_imported_by_name():
    assert registers_a_kind('MODELS.register("rnn", RNNLM)') and not registers_a_kind("x.register(1)")
    assert "seqjax.models.language_models.vae" in imported_modules(
        "from seqjax.models.language_models.vae import interpolate_latents"
    )
    assert "seqjax.objectives.vae" in imported_modules("from seqjax.objectives import vae")


def test_no_generic_module_imports_a_kinds_own_module():
    kind_modules = {_module(path) for path in ROOT.rglob("*.py") if registers_a_kind(path.read_text())}
    assert "seqjax.models.classic.ngram" in kind_modules and "seqjax.heads.adaptive" in kind_modules
    found = {}
    for path in _generic_files():
        own = _module(path).split(".")[:2]  # objectives may build on each other
        imported = {m for m in imported_modules(path.read_text()) & kind_modules if m.split(".")[:2] != own}
        if imported:
            found[str(path.relative_to(ROOT))] = sorted(imported)
    assert found == {}
