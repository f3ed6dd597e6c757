"""`KindSection`: a config section (`ModelConfig`, `HeadConfig`) whose kinds may have options of
their own, held as a group per kind and named for it (`model.rnn_vae.latent_size`).

A kind's options class is declared with the kind (`seqjax.kinds`), so that a kind registered at
run time brings its group with it: the groups are read from the table, not written as fields.
The section stores only the groups set away from their defaults (`groups`), so that a section
built before a kind was registered still reads that kind's defaults, and two sections with the
same values compare equal. `members` lists a config node's keys and groups, in the order the
config's path code, its saved form and its text use.
"""

from __future__ import annotations

import dataclasses
import keyword
import typing
from typing import Any, ClassVar, Generic, TypeVar

from seqjax.kinds import Kinds


class KindSection:
    """Mixin of a frozen dataclass section with a `kind` and a `groups: tuple` field.

    `section.<kind>` is that kind's options (its defaults unless set): a typed property of the
    section for a built-in kind, found by name for a kind registered at run time; a kind named by
    a Python keyword is read as `section.<kind>_` (`head.class_`), and named `<kind>` everywhere
    else."""

    KINDS: ClassVar[Kinds]
    groups: tuple[Any, ...]

    def __post_init__(self) -> None:
        owners = {options: kind for kind, options in self.KINDS.options.items()}
        given: dict[str, Any] = {}
        for group in self.groups:
            kind = owners.get(type(group))
            if kind is None:
                raise ValueError(
                    f"{self.KINDS.section} groups must be options of its kinds "
                    f"({', '.join(c.__name__ for c in owners)}), got {group!r}"
                )
            if kind in given:
                raise ValueError(f"{self.KINDS.section}.{kind} is given twice, got {given[kind]!r} and {group!r}")
            given[kind] = group
        # Only the groups away from their defaults, in the table's order: one form per value.
        kept = tuple(given[k] for k, options in self.KINDS.options.items() if k in given and given[k] != options())
        object.__setattr__(self, "groups", kept)

    def group(self, kind: str) -> Any:
        """The options of `kind` (its defaults unless set). Raises ValueError for a kind without
        options of its own."""
        options = self.KINDS.options.get(kind)
        if options is None:
            raise ValueError(
                f"{self.KINDS.section}.{kind} is not a group: the kinds with options of their own are "
                f"{', '.join(self.KINDS.options)}"
            )
        for group in self.groups:
            if type(group) is options:
                return group
        return options()

    def with_groups(self, **by_kind: Any) -> Any:
        """This section with the groups of `by_kind` (kind -> its options) replaced."""
        for kind, group in by_kind.items():
            if type(group) is not self.KINDS.options.get(kind):
                raise ValueError(f"{self.KINDS.section}.{kind} must be its kind's options, got {group!r}")
        merged = {kind: self.group(kind) for kind in self.KINDS.options} | by_kind
        return dataclasses.replace(typing.cast(Any, self), groups=tuple(merged.values()))

    if not typing.TYPE_CHECKING:  # so that the type checker still refuses a misspelt attribute

        def __getattr__(self, name: str) -> Any:
            # Reached only for names that are neither fields nor the sections' typed properties of
            # the built-in kinds: the group of a kind registered at run time.
            kind = name[:-1] if name.endswith("_") and keyword.iskeyword(name[:-1]) else name
            if not name.startswith("_") and kind in self.KINDS.options:
                return self.group(kind)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


T = TypeVar("T")


class KindGroup(Generic[T]):
    """A section's typed attribute reading one built-in kind's group (`ModelConfig.rnn_vae`), so
    that type-checked code reads `cfg.model.rnn_vae.latent_size` as an int."""

    def __init__(self, kind: str, options: type[T]) -> None:
        self.kind, self.options = kind, options

    @typing.overload
    def __get__(self, section: None, owner: type) -> KindGroup[T]: ...

    @typing.overload
    def __get__(self, section: KindSection, owner: type) -> T: ...

    def __get__(self, section: KindSection | None, owner: type) -> KindGroup[T] | T:
        return self if section is None else typing.cast(T, section.group(self.kind))


def member_types(cls: type) -> dict[str, Any]:
    """name -> annotated type of each key and group of a config node class: its fields, and for
    a `KindSection`, in place of `groups`, each kind's options class under the kind's name."""
    hints = typing.get_type_hints(cls)
    types_ = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
    if issubclass(cls, KindSection):
        del types_["groups"]
        types_.update(cls.KINDS.options)
    return types_


def members(node: Any) -> list[tuple[str, dataclasses.Field | None, Any]]:
    """(name, field, value) of each key and group of a config node, in declaration order: its
    fields, then for a `KindSection`, in place of `groups`, a group per kind that has options of
    its own (field None)."""
    fields = dataclasses.fields(node)
    if not isinstance(node, KindSection):
        return [(f.name, f, getattr(node, f.name)) for f in fields]
    keys = [(f.name, f, getattr(node, f.name)) for f in fields if f.name != "groups"]
    return keys + [(kind, None, node.group(kind)) for kind in node.KINDS.options]
