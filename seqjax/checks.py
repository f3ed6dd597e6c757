"""Host-side value checks, one of each: an int, a real number, a name among choices, a rate.

Each raises `ValueError` naming the value and its rule in one line
(`model.d_model must be an int >= 1, got 0`), and returns the value as a plain Python number, so
that a NumPy scalar (`np.int64(3)`) passes where an int is meant and a bool never does. The
config, the heads, the decoders and the data readers all check through these. `integer`,
`number` and `check_rate` are the same checks as a kind's options declare them
(`seqjax.config.option(..., check=integer(0))`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Collection
from typing import Any

# A check declared on an option: called with the option's name and value; raises ValueError.
Check = Callable[[str, Any], object]


def is_int(value: Any) -> bool:
    """An integer of any kind (Python or NumPy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A finite real number of any kind (int, float or NumPy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_int(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """`value` as an int in [minimum, maximum] (no maximum: unbounded above)."""
    if not is_int(value) or value < minimum or (maximum is not None and value > maximum):
        rule = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an int {rule}, got {value!r}")
    return int(value)


def check_number(name: str, value: Any, low: float, high: float = math.inf, *, open_low: bool = False) -> float:
    """`value` as a float, finite and in [low, high] (or (low, high] with `open_low`)."""
    if not is_real(value) or value < low or (open_low and value == low) or value > high:
        bounds = f"{'(' if open_low else '['}{low}, {high}{']' if math.isfinite(high) else ')'}"
        raise ValueError(f"{name} must be a finite number in {bounds}, got {value!r}")
    return float(value)


def check_one_of(name: str, value: Any, choices: Collection[str]) -> str:
    """`value`, one of `choices`."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def check_rate(name: str, value: Any) -> float:
    """`value` as a float in [0, 1), an optimizer's running-average rate."""
    if check_number(name, value, 0.0) >= 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


def integer(minimum: int = 1) -> Check:
    """`check_int` from `minimum` up, as an option declares it."""
    return lambda name, value: check_int(name, value, minimum)


def number(low: float, high: float = math.inf, *, open_low: bool = False) -> Check:
    """`check_number` within these bounds, as an option declares it."""
    return lambda name, value: check_number(name, value, low, high, open_low=open_low)
