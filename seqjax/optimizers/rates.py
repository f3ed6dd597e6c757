"""The check the optimizers' running-average rates share: each in [0, 1)."""

from __future__ import annotations

from typing import Any

from seqjax.checks import check_number


def check_rates(options: Any, *names: str) -> None:
    """Raises ValueError naming the first of `options`' fields `names` outside [0, 1)."""
    for name in names:
        value = getattr(options, name)
        if check_number(name, value, 0.0) >= 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value!r}")
