"""`override`: `--set section.key=value` assignments applied to a config, each checked on the host:
the key exists (else the key likely meant is named), the value converts to the field's type and is
one of its choices, and the key applies to the resolved kinds (else it would be ignored)."""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from typing import Any

from seqjax.config.fields import applies_to, choices
from seqjax.config.groups import member_types, members
from seqjax.config.migrations import MOVED, RENAMED
from seqjax.config.sections import Config


def coerce(text_or_value: Any, kind: Any, key: str) -> Any:
    """A CLI string (or a saved JSON/TOML value) as the annotated type `kind`, or ValueError. A tuple
    is read from `a,b`, `(a, b)` or the TOML list `[a, b]` (what `seqjax config` prints) or a list."""
    origin = typing.get_origin(kind)
    if origin is tuple:
        (item,) = {a for a in typing.get_args(kind) if a is not Ellipsis}
        parts = _items(text_or_value, key) if isinstance(text_or_value, str) else list(text_or_value)
        return tuple(coerce(p, item, key) for p in parts)
    if origin is typing.Literal:  # one of its names: `check_choice`, which names the one likely meant
        return coerce(text_or_value, str, key)
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"unsupported config type {kind} for {key}")
    value = text_or_value
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            lowered = str(value).strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind is str:
            if not isinstance(value, str):
                raise ValueError
            return value
    except (ValueError, TypeError):  # TypeError: int() of a list, say
        raise ValueError(f"{key} must be {kind.__name__}, got {value!r}") from None
    raise TypeError(f"unsupported config type {kind} for {key}")


def _items(text: str, key: str) -> list[Any]:
    """The items of a tuple given as text: the TOML list `seqjax config` prints (`[2000, 8000]`),
    or items separated by commas (`2000,8000`, `(2000, 8000)`)."""
    stripped = text.strip()
    if not stripped.startswith("["):
        return [p for p in stripped.removeprefix("(").removesuffix(")").split(",") if p.strip()]
    try:
        return list(tomllib.loads(f"value = {stripped}")["value"])
    except tomllib.TOMLDecodeError:
        raise ValueError(f"{key} must be a list such as [16, 32] (or 16,32), got {text!r}") from None


def valid_keys(node: Any, prefix: str = "") -> list[str]:
    """Every settable `a.b(.c)` key under a config (or a section of one), in declaration order."""
    keys = []
    for name, _, value in members(node):
        if dataclasses.is_dataclass(value):
            keys += valid_keys(value, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _did_you_mean(options: list[str]) -> str:
    return f"; did you mean {' or '.join(options)}?" if options else ""


def unknown_key(config: Config, key: str) -> ValueError:
    """The error for a key `config` does not have, naming the key likely meant."""
    if key in RENAMED:
        return ValueError(f"config key {key!r} was renamed to {RENAMED[key]!r}")
    if key in MOVED:
        return ValueError(f"{key} is now {MOVED[key]}, in the group of the one kind that reads it")
    keys = valid_keys(config)
    # A misspelt key, else the same name elsewhere (model.cutoffs -> head.adaptive.cutoffs).
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.8)
    close = close or [k for k in keys if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
    return ValueError(
        f"unknown config key {key!r}{_did_you_mean(close)} (`seqjax config` lists every key with its description)"
    )


def _choice_hint(node: Any, prefix: str, name: str, value: str, allowed: tuple[str, ...]) -> str:
    """' ; did you mean ...?': a close spelling of `value` among `allowed`, or, for a `kind`, the
    kind whose option takes `value` (model.kind=lstm -> model.kind=rnn with model.cell=lstm)."""
    close = difflib.get_close_matches(value, allowed, n=2, cutoff=0.75)
    if close or name != "kind":
        return _did_you_mean([f"{prefix}{name}={c}" for c in close])
    for member, field, group in members(node):
        if field is not None:
            kinds = applies_to(field)
            if value in choices(type(node), field) and kinds:
                return _did_you_mean([f"{prefix}kind={kinds[0]} with {prefix}{member}={value}"])
        elif dataclasses.is_dataclass(group):  # a kind's group: its option that takes `value`
            for option_field in dataclasses.fields(group):
                if value in choices(type(group), option_field):
                    return _did_you_mean([f"{prefix}kind={member} with {prefix}{member}.{option_field.name}={value}"])
    return ""


def check_choices(node: Any, prefix: str = "") -> None:
    """Raises ValueError naming the first key of `node` (a config, or a section of one) whose
    value is not one of its field's choices, e.g. a model.kind that is not registered, with the
    value likely meant when there is one."""
    for name, field, value in members(node):
        if dataclasses.is_dataclass(value):
            check_choices(value, f"{prefix}{name}.")
        elif field is not None:
            check_choice(node, prefix, field, value)


def check_choice(node: Any, prefix: str, field: dataclasses.Field, value: Any) -> None:
    """Raises ValueError when `value` is not one of the choices of `node`'s `field` (any value when
    it has none), naming the key and the value likely meant."""
    allowed = choices(type(node), field)
    if allowed and value not in allowed:
        hint = _choice_hint(node, prefix, field.name, value, allowed)
        raise ValueError(f"{prefix}{field.name} must be one of {', '.join(allowed)}, got {value!r}{hint}")


def _replace(node: Any, assignments: list[tuple[list[str], Any, str]], config: Config, prefix: str = "") -> Any:
    """`node` with each (path, value, key) assignment set, values converted to their annotated
    types. Each dataclass is rebuilt once with all of its assignments, so that options checked
    together (a group's `__post_init__`) can be changed together; a group's check names the
    key it refuses by its full path (`objective.scheduled_sampling.passes must be ...`)."""
    types_ = member_types(type(node))
    values = {name: value for name, _, value in members(node)}
    updates: dict[str, Any] = {}
    groups: dict[str, list[tuple[list[str], Any, str]]] = {}
    for path, value, key in assignments:
        name = path[0]
        if name not in types_:
            raise unknown_key(config, key)
        child = values[name]
        if len(path) == 1:
            if key in MOVED:  # head.tree, the tree head's group, was its option
                raise unknown_key(config, key)
            if dataclasses.is_dataclass(child):
                raise ValueError(
                    f"{key} is a group of keys, not a value: set one of {', '.join(valid_keys(child, key + '.'))}"
                )
            updates[name] = coerce(value, types_[name], key)
        elif dataclasses.is_dataclass(child):
            groups.setdefault(name, []).append((path[1:], value, key))
        else:
            raise unknown_key(config, key)
    for name, group in groups.items():
        updates[name] = _replace(values[name], group, config, f"{prefix}{name}.")
    # Refused here, with the value likely meant, before a kind's `Options` refuses it while the
    # node is rebuilt (without the hint: it knows neither the key nor the other kinds).
    for field in dataclasses.fields(node):
        if field.name in updates:
            check_choice(node, prefix, field, updates[field.name])
    try:
        return rebuilt(node, updates)
    except ValueError as error:
        if not prefix:
            raise
        raise ValueError(f"{prefix}{error}") from None


def _fields(node: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(node)}


def rebuilt(node: Any, updates: dict[str, Any]) -> Any:
    """`node` with `updates` (name -> value, or a kind's options under the kind's name)."""
    fields = _fields(node)
    groups = [value for name, value in updates.items() if name not in fields]
    node = node.with_options(*groups) if groups else node
    return dataclasses.replace(node, **{name: value for name, value in updates.items() if name in fields})


def inapplicable(config: Config, key: str) -> str | None:
    """Why `key` means nothing under `config`'s kinds (a field declared for other kinds, or a
    group named for another kind), or None when it applies."""
    node: Any = config
    parts = key.split(".")
    for depth, name in enumerate(parts):
        field, child = {member: (f, value) for member, f, value in members(node)}[name]
        owner = ".".join(parts[:depth])
        kind = getattr(node, "kind", None)
        if kind is not None and dataclasses.is_dataclass(child) and name != kind:
            return f"{key} applies to {owner}.kind={name}, not {kind!r}"
        kinds = applies_to(field) if field is not None else ()
        if kind is not None and kinds and kind not in kinds:
            return f"{key} applies to {owner}.kind in ({', '.join(kinds)}), not {kind!r}"
        node = child
    return None


def override(config: Config, assignments: list[str]) -> Config:
    """Applies `section.key=value` assignments, each checked against the dataclass types.

    Raises:
      ValueError: malformed assignment, unknown key (the message names the likely meant one),
        a renamed key (the message names the new one), a value that does not convert to the
        field's type or is not one of its choices (`check_choices`, for every key of the
        result), or a key that does not apply to the resolved kind (it would be ignored).
    """
    keys, parsed = [], []
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--set expects key=value, got {assignment!r}")
        keys.append(key)
        parsed.append((key.split("."), value, key))
    config = _replace(config, parsed, config)
    check_choices(config)
    for key in keys:
        reason = inapplicable(config, key)
        if reason:
            raise ValueError(f"{reason}: it would be ignored")
    return config
