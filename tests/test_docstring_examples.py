"""Every docstring example of seqjax.heads, seqjax.decoding and seqjax.metrics runs and prints what it says.

Each example is run on its own, with empty globals (so it imports what it uses and can be
pasted as is), and every public function of the three packages must have one.
"""

import doctest
import importlib
import inspect
import pkgutil

import pytest

PACKAGES = ("seqjax.heads", "seqjax.decoding", "seqjax.metrics")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
MIN_EXAMPLES = 45  # the examples there are when this was written: the test cannot pass empty


def modules():
    for name in PACKAGES:
        package = importlib.import_module(name)
        yield package
        for info in pkgutil.iter_modules(package.__path__, prefix=f"{name}."):
            yield importlib.import_module(info.name)


def examples() -> dict[str, doctest.DocTest]:
    found = {}
    for module in modules():
        for test in doctest.DocTestFinder().find(module, globs={}):
            if test.examples:
                found[test.name] = test
    return dict(sorted(found.items()))


EXAMPLES = examples()


def public_functions():
    """(package, name) of every function in a package's `__all__`, and of `seqjax.heads.samplers`'."""
    for name in (*PACKAGES, "seqjax.heads.samplers"):
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for public in names:
            value = getattr(module, public)
            if inspect.isfunction(value) and value.__module__.startswith(PACKAGES):
                yield name, public


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_docstring_example_runs(name):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    result = runner.run(EXAMPLES[name])
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (output above)"


def test_enough_examples_were_found():
    assert len(EXAMPLES) >= MIN_EXAMPLES, sorted(EXAMPLES)


@pytest.mark.parametrize("package, name", list(public_functions()))
def test_every_public_function_has_an_example(package, name):
    function = getattr(importlib.import_module(package), name)
    assert f"{function.__module__}.{function.__qualname__}" in EXAMPLES
    assert "Example:" in (function.__doc__ or "")
