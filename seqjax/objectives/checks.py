"""Host checks of the objectives' hyper-parameters: the value and the rule in one message."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence


def check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def check_number(name: str, value, low: float, high: float = math.inf, *, open_low: bool = False) -> None:
    """A finite real in [low, high] (or (low, high] with open_low)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (value < low or (open_low and value == low) or value > high):
        ok = False
    if not ok:
        bounds = f"{'(' if open_low else '['}{low}, {high}{']' if math.isfinite(high) else ')'}"
        raise ValueError(f"{name} must be a finite number in {bounds}, got {value!r}")


def check_one_of(name: str, value, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
