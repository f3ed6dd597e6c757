"""`KindSection`: a config section (model, head, objective, optimizer) whose `kind` names a
registered kind, each kind's own options held as a group named for it (`model.rnn_vae.latent_size`).

The groups are read from the section's registry, not written as fields, so that a kind registered
at run time brings its group with it. A section stores only the groups set away from their
defaults, in the registry's order, so that a section built before a kind was registered still
reads that kind's defaults and two sections with the same values compare equal. `members` lists a
config node's keys and groups in the order the config's paths, its saved form and its text use.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar, Self, TypeVar

from seqjax.config.registry import Registry

T = TypeVar("T")


class KindSection:
    """Mixin of a frozen dataclass section with a `kind` and a `groups: tuple` field.

    `groups` takes options instances of the section's kinds, in any order (an objective given for
    its options, `VAE(beta=0.5)`, is kept as its options class, `VAEOptions(beta=0.5)`)."""

    KINDS: ClassVar[Registry]
    kind: str
    groups: tuple[Any, ...]

    def __post_init__(self) -> None:
        given: dict[str, Any] = {}
        for group in self.groups:
            kind = self.KINDS.owner(type(group))
            if kind is None:
                classes = ", ".join(c.__name__ for c in self.KINDS.options.values())
                raise ValueError(f"{self.KINDS.key} groups must be options of its kinds ({classes}), got {group!r}")
            if kind in given:
                raise ValueError(f"{_section(self)}.{kind} is given twice, got {given[kind]!r} and {group!r}")
            options = self.KINDS.options[kind]
            if type(group) is not options:
                group = options(**{f.name: getattr(group, f.name) for f in dataclasses.fields(options)})
            given[kind] = group
        kept = tuple(given[k] for k, options in self.KINDS.options.items() if k in given and given[k] != options())
        object.__setattr__(self, "groups", kept)

    def group(self, kind: str) -> Any:
        """The options of `kind` (its defaults unless set). Raises ValueError for a kind without
        options of its own."""
        options = self.KINDS.options.get(kind)
        if options is None:
            raise ValueError(
                f"{_section(self)}.{kind} is not a group: the kinds with options of their own are "
                f"{', '.join(self.KINDS.options)}"
            )
        return next((g for g in self.groups if type(g) is options), None) or options()

    def options_of(self, options: type[T]) -> T:
        """The group of the kind whose options class is `options`, typed as it."""
        kind = self.KINDS.owner(options)
        if kind is None or self.KINDS.options[kind] is not options:
            raise ValueError(f"{options.__name__} are not the options of a {self.KINDS.key}")
        return typing.cast(T, self.group(kind))

    @property
    def options(self) -> Any:
        """The options of the section's own kind, or None for a kind that has none."""
        return self.group(self.kind) if self.kind in self.KINDS.options else None

    def with_options(self, *groups: Any) -> Self:
        """This section with the groups `groups` (options instances) in place of their kinds'."""
        kinds = {self.KINDS.owner(type(g)) for g in groups}
        kept = tuple(g for g in self.groups if self.KINDS.owner(type(g)) not in kinds)
        result: Self = dataclasses.replace(typing.cast(Any, self), groups=(*kept, *groups))
        return result


def _section(section: KindSection) -> str:
    return section.KINDS.key.rsplit(".", 1)[0]


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
