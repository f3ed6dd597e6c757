"""`option`: a config field that documents itself and says which kinds it applies to; and the
choices of a field, from its type (`Literal["pre", "post"]`) or from a registry.

A field whose values are a few fixed names is annotated with a `Literal` of them; a field whose
values are registered kinds (`model.kind`, `optim.kind`) names its registry in `choices`. Either
way `choices(cls, field)` gives them, and the config refuses any other value where it is set.
A field with another rule declares it (`check=integer(0)`, `seqjax.checks`); a kind's options
class derives from `Options`, which applies both rules whenever one is made.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Collection, Iterator
from typing import Any

from seqjax.checks import Check, check_one_of


def option(
    default: Any, doc: str, *, kinds: Collection[str] = (), choices: Collection[str] = (), check: Check | None = None
) -> Any:
    """A dataclass field with its one-line description; `kinds`: the values of its section's
    `kind` it means something for (a registry's live `family` view, or names), others refused
    when it is set explicitly (it would be ignored); `choices`: a registry whose kinds are its
    values (a field of a few fixed values says them in its `Literal` type instead); `check`: the
    rule its values follow, applied by `Options`."""
    metadata = {"doc": doc, "kinds": kinds, "choices": choices, "check": check}
    return dataclasses.field(default=default, metadata=metadata)


class Options:
    """The base of a kind's options dataclass: each field is checked when the options are made,
    one of a `Literal` type against its values, one declared with `check` by that rule, so that
    a bad value is refused wherever it comes from (`--set`, a config file, a saved run, Python).
    A rule between fields goes in the subclass's `__post_init__`, after `super().__post_init__()`."""

    def __post_init__(self) -> None:
        cls: type = type(self)  # hashable as mypy sees it, for the cache
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            values = _literal_values(cls, field.name)
            if values:
                check_one_of(field.name, value, values)
            check = field.metadata.get("check")
            if check is not None:
                check(field.name, value)


@functools.cache
def _literal_values(cls: type, name: str) -> tuple[str, ...]:
    annotation = typing.get_type_hints(cls).get(name)
    return tuple(typing.get_args(annotation)) if typing.get_origin(annotation) is typing.Literal else ()


def choices(cls: type, field: dataclasses.Field) -> tuple[str, ...]:
    """The values `field` of dataclass `cls` may take: its `Literal` type's, else its registry's,
    else () (any value of its type)."""
    annotation = typing.get_type_hints(cls).get(field.name)
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(typing.get_args(annotation))
    return tuple(field.metadata.get("choices", ()))


def describe(cls: type, field: dataclasses.Field) -> str:
    """A field's one-line description; an empty one is its choices (`a | b | c`), read when asked
    so that a kind registered later is listed."""
    return field.metadata.get("doc", "") or " | ".join(choices(cls, field))


class OrAuto:
    """The choices of a field that takes "auto" (resolved when the run starts) or a registry's kinds:
    a live view, so that a kind registered later is a choice."""

    def __init__(self, kinds: Collection[str]) -> None:
        self._kinds = kinds

    def __iter__(self) -> Iterator[str]:
        return iter(("auto", *self._kinds))

    def __contains__(self, name: object) -> bool:
        return name == "auto" or name in self._kinds

    def __len__(self) -> int:
        return 1 + len(self._kinds)


def applies_to(field: dataclasses.Field) -> tuple[str, ...]:
    """The kinds `field` is declared for (empty: every kind)."""
    return tuple(field.metadata.get("kinds", ()))
