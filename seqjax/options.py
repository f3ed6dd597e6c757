"""`option`: a config field that documents itself, the kinds it applies to and its choices."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any


def option(default: Any, doc: str, *, kinds: Collection[str] = (), choices: Collection[str] = ()) -> Any:
    """A dataclass field with its one-line description; when it only means something for some
    values of its section's `kind`, those kinds (`seqjax.config.override` refuses an explicit
    setting for another kind: it would be ignored); when it takes one of a few names, those
    (`seqjax.config.check_choices` refuses any other). `kinds` and `choices` may be live views of
    a registry (`seqjax.kinds`), read each time they are checked."""
    return dataclasses.field(default=default, metadata={"doc": doc, "kinds": kinds, "choices": choices})


def describe(field: dataclasses.Field) -> str:
    """A field's one-line description; an empty one is its choices (`a | b | c`), read when asked
    so that a kind registered later is listed."""
    return field.metadata.get("doc", "") or " | ".join(field.metadata.get("choices", ()))
