"""What a traced program computes, read from its jaxpr: robust across JAX versions, unlike HLO text."""

from collections.abc import Iterator

import jax
from jax.extend import core


def sub_jaxprs(eqn) -> Iterator[core.Jaxpr]:
    """The jaxprs nested in an equation's parameters (pjit, scan, while, cond, custom_vjp, shard_map)."""
    for value in eqn.params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, core.Jaxpr):
                yield item


def equations(jaxpr: core.Jaxpr, primitive: str | None = None) -> Iterator:
    """Every equation of `jaxpr` and of the jaxprs nested in it (of one primitive if named)."""
    for eqn in jaxpr.eqns:
        if primitive is None or eqn.primitive.name == primitive:
            yield eqn
        for sub in sub_jaxprs(eqn):
            yield from equations(sub, primitive)


def matmuls(fn, *args) -> list[tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]]:
    """(operand dtypes, operand shapes) of every dot_general that fn(*args) traces."""
    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    return [
        (tuple(str(v.aval.dtype) for v in eqn.invars), tuple(tuple(v.aval.shape) for v in eqn.invars))
        for eqn in equations(jaxpr, "dot_general")
    ]
