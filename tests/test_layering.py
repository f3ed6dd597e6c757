"""The package's import graph: no circle, and the configuration below the code it configures.

Every `import` in seqjax/ counts, those inside functions and under `TYPE_CHECKING` included:
a circle hidden behind a late import is still a circle. `from package import module` is an
edge to the module; importing a module runs its package's `__init__`, which is not counted
as an edge (else every package would be a circle with its own modules).
"""

from __future__ import annotations

import ast
import pathlib

import seqjax

ROOT = pathlib.Path(seqjax.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """module -> the seqjax modules it imports (dotted names)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]) if node.level else ""
                source = (base.rstrip(".") if node.level else node.module) or ""
                edges.update(f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names)
        graph[name] = {edge for edge in edges if edge in modules and edge != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for child in graph[node]:
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for child in graph[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def test_circles_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_no_module_of_seqjax_imports_itself_back():
    assert circles(import_graph()) == []


def test_the_config_imports_no_code_it_configures():
    below = reachable(import_graph(), "seqjax.config")
    configured = ("seqjax.models", "seqjax.heads", "seqjax.objectives", "seqjax.data", "seqjax.training")
    assert sorted(m for m in below if m.startswith(configured)) == []
