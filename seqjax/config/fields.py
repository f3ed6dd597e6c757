"""`option`: a config field that documents itself and says which kinds it applies to; and the
choices of a field, from its type (`Literal["pre", "post"]`) or from a registry.

A field whose values are a few fixed names is annotated with a `Literal` of them; a field whose
values are registered kinds (`model.kind`, `optim.kind`) names its registry in `choices`. Either
way `choices(cls, field)` gives them, and the config refuses any other value where it is set.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Collection, Iterator
from typing import Any


def option(default: Any, doc: str, *, kinds: Collection[str] = (), choices: Collection[str] = ()) -> Any:
    """A dataclass field with its one-line description; `kinds`: the values of its section's
    `kind` it means something for (a registry's live `family` view, or names), others refused
    when it is set explicitly (it would be ignored); `choices`: a registry whose kinds are its
    values (a field of a few fixed values says them in its `Literal` type instead)."""
    return dataclasses.field(default=default, metadata={"doc": doc, "kinds": kinds, "choices": choices})


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
