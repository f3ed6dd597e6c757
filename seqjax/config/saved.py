"""A config's saved form: every key nested by its path (`to_dict`, a run's `config.json`), and
the config read back from it (`from_dict`), earlier versions' keys included (`migrations`)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from seqjax.config.groups import KindSection, member_types, members
from seqjax.config.migrations import RENAMED, moved_into_groups
from seqjax.config.overrides import check_choices, coerce, rebuilt
from seqjax.config.sections import Config


def to_dict(config: Any) -> dict[str, Any]:
    """Every key of a config (or a section or group of one), nested by its path."""
    return {name: to_dict(value) if dataclasses.is_dataclass(value) else value for name, _, value in members(config)}


def _from_dict(cls: Any, values: dict[str, Any], prefix: str) -> Any:
    types_ = member_types(cls)
    updates = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if key in RENAMED:
            raise ValueError(f"saved config key {key!r} was renamed to {RENAMED[key]!r}; this version cannot read it")
        if name not in types_:
            raise ValueError(f"unknown config key {key!r} in saved config")
        kind = types_[name]
        if dataclasses.is_dataclass(kind):
            if not isinstance(value, dict):
                raise ValueError(f"{key} must be a group of keys in saved config, got {value!r}")
            updates[name] = _from_dict(kind, value, key + ".")
        else:
            updates[name] = coerce(value, kind, key)
    try:
        return rebuilt(cls(), updates) if issubclass(cls, KindSection) else cls(**updates)
    except ValueError as error:  # a group's own check names its option; the key is its full path
        if not prefix:
            raise
        raise ValueError(f"{prefix}{error}") from None


def from_dict(values: dict[str, Any]) -> Config:
    """Rebuilds a Config from `to_dict` output (e.g. a checkpoint's saved config).

    Unknown or renamed keys and values outside their choices raise ValueError, so that a
    config from an incompatible version is refused rather than silently half-read.
    """
    config: Config = _from_dict(Config, moved_into_groups(values), "")
    check_choices(config)
    return config


def dumps(config: Config) -> str:
    return json.dumps(to_dict(config), indent=2)
