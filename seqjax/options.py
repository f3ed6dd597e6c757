"""`option`: a config field that documents itself, the kinds it applies to and its choices."""

from __future__ import annotations

import dataclasses
from typing import Any


def option(default: Any, doc: str, *, kinds: tuple[str, ...] = (), choices: tuple[str, ...] = ()) -> Any:
    """A dataclass field with its one-line description; when it only means something for some
    values of its section's `kind`, those kinds (`seqjax.config.override` refuses an explicit
    setting for another kind: it would be ignored); when it takes one of a few names, those
    (`seqjax.config.check_choices` refuses any other)."""
    return dataclasses.field(default=default, metadata={"doc": doc, "kinds": kinds, "choices": choices})
