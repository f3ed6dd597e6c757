"""`option`: a config field that documents itself and the kinds it applies to."""

from __future__ import annotations

import dataclasses
from typing import Any


def option(default: Any, doc: str, *, kinds: tuple[str, ...] = ()) -> Any:
    """A dataclass field with its one-line description and, when it only means something for
    some values of its section's `kind`, those kinds (`seqjax.config.override` refuses an
    explicit setting for another kind: it would be ignored)."""
    return dataclasses.field(default=default, metadata={"doc": doc, "kinds": kinds})
