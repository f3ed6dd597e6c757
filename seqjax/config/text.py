"""The config as text: what `seqjax config` prints, what `seqjax train --help` lists, and
what a run prints of its config.

`to_toml(config)` is one `key = value` line per key under a `[section]` (or
`[section.group]`) header, each with a comment giving its type, its default when the value
differs from it, its description, and whether it applies to the resolved kinds; `from_toml`
reads that text back into the same config. `reference()` is the compact list of every key
with its type and default; `changed(config)` the `key = value` lines that differ from the
defaults.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
import typing
from collections.abc import Iterator
from typing import Any

from seqjax.config.fields import describe
from seqjax.config.groups import member_types, members
from seqjax.config.overrides import inapplicable
from seqjax.config.saved import from_dict
from seqjax.config.sections import Config


@dataclasses.dataclass(frozen=True)
class Entry:
    """One settable key: its dotted name, annotated type, value, default and description."""

    key: str
    kind: Any
    value: Any
    default: Any
    doc: str


def type_name(kind: Any) -> str:
    """`int`, `str`, `tuple[int, ...]`; a `Literal` of names is a `str` (its names are the description's)."""
    if typing.get_origin(kind) is typing.Literal:
        return "str"
    return getattr(kind, "__name__", str(kind)) if typing.get_origin(kind) is None else str(kind)


def groups(config: Any, default: Any, prefix: str = "") -> Iterator[tuple[str, list[Entry]]]:
    """(table name, its entries) of every section and group of `config`, a table's own keys
    before its groups (the order TOML needs); `default` is the same node of `Config()`."""
    types_ = member_types(type(config))
    entries, nested = [], []
    for (name, field, value), (_, _, fallback) in zip(members(config), members(default)):
        if field is None or dataclasses.is_dataclass(value):
            nested.append((f"{prefix}{name}", value, fallback))
        else:
            entries.append(Entry(f"{prefix}{name}", types_[name], value, fallback, describe(type(config), field)))
    if entries:
        yield prefix.rstrip("."), entries
    for name, value, fallback in nested:
        yield from groups(value, fallback, f"{name}.")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's string escapes are TOML's
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


def to_toml(config: Config) -> str:
    """Every key of `config`, TOML; `from_toml` reads it back. A key that does not apply to the
    resolved kinds (it would be ignored) says so in its comment."""
    lines = ["# the resolved config: key = value  # type[, default when different]: description"]
    for table, entries in groups(config, Config()):
        lines += ["", f"[{table}]"]
        width = max(len(e.key) - len(table) + len(toml_value(e.value)) + 2 for e in entries)
        for e in entries:
            assignment = f"{e.key[len(table) + 1 :]} = {toml_value(e.value)}"
            default = "" if e.value == e.default else f", default {toml_value(e.default)}"
            reason = inapplicable(config, e.key)
            unused = f" (not used: {reason.removeprefix(e.key + ' ')})" if reason else ""
            lines.append(f"{assignment:<{width}}  # {type_name(e.kind)}{default}: {e.doc}{unused}")
    return "\n".join(lines) + "\n"


def from_toml(text: str) -> Config:
    """The config `to_toml` printed (or any TOML of its sections and keys; absent keys take
    their defaults). Raises ValueError for malformed TOML, unknown keys or wrong types."""
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"config is not valid TOML: {error}") from None
    return from_dict(values)


def changed(config: Config) -> list[str]:
    """`key = value` of every key whose value differs from its default, in declaration order."""
    return [
        f"{e.key} = {toml_value(e.value)}"
        for _, entries in groups(config, Config())
        for e in entries
        if e.value != e.default
    ]


def reference(width: int = 100) -> str:
    """Every section's keys with their types and defaults (`name: type = default`), a few
    lines per section, no item broken across lines."""
    lines = []
    for table, entries in groups(Config(), Config()):
        line = f"{table}:"
        for e in entries:
            item = f" {e.key[len(table) + 1 :]}: {type_name(e.kind)} = {toml_value(e.value)};"
            if len(line) + len(item) > width and line.endswith(";"):
                lines.append(line)
                line = "   "
            line += item
        lines.append(line.rstrip(";"))
    return "\n".join(lines)


def describe_changes(config: Config) -> str:
    """What a run prints of its config: the keys that differ from the defaults, one a line."""
    lines = changed(config)
    if not lines:
        return "config: the defaults (config.json holds every key)"
    return "\n  ".join(["config, where it differs from the defaults (config.json holds every key):", *lines])
