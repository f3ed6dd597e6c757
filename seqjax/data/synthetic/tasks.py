"""Seeded seq2seq tasks with a checkable answer: copy, reverse, sort and addition of strings.

Each generator draws from `numpy.random.default_rng(seed)` (`seeds.seeded_rng`), so the same
seed gives the same data on every machine. A seed may be an int or a tuple of ints, e.g.
`(seed, split)` for independent splits from one configured seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from seqjax.data.synthetic.seeds import Seed, seeded_rng

SYMBOLS = "0123456789abcdef"


def _random_strings(n: int, seed: Seed, min_len: int, max_len: int) -> list[str]:
    if not 1 <= min_len <= max_len:
        raise ValueError(f"lengths must satisfy 1 <= min_len <= max_len, got {min_len}, {max_len}")
    rng = seeded_rng(n, seed)
    lengths = rng.integers(min_len, max_len + 1, size=n)
    return ["".join(rng.choice(list(SYMBOLS), size=length)) for length in lengths]


def copy_task(n: int, seed: Seed, *, min_len: int = 2, max_len: int = 20) -> tuple[list[str], list[str]]:
    """n sources of SYMBOLS with lengths uniform in [min_len, max_len]; the target repeats them."""
    sources = _random_strings(n, seed, min_len, max_len)
    return sources, list(sources)


def reverse_task(n: int, seed: Seed, *, min_len: int = 2, max_len: int = 20) -> tuple[list[str], list[str]]:
    """As `copy_task`, with each target the source reversed."""
    sources = _random_strings(n, seed, min_len, max_len)
    return sources, [source[::-1] for source in sources]


def sort_task(n: int, seed: Seed, *, min_len: int = 2, max_len: int = 20) -> tuple[list[str], list[str]]:
    """As `copy_task`, with each target the source's symbols in ascending order."""
    sources = _random_strings(n, seed, min_len, max_len)
    return sources, ["".join(sorted(source)) for source in sources]


def addition_task(n: int, seed: Seed, *, max_digits: int = 6) -> tuple[list[str], list[str]]:
    """Sources "A+B" and targets "C" = A + B in decimal, A and B of 1..max_digits digits.

    The digit count is drawn first, then the number, so short and long operands are equally
    common (uniform numbers would almost all have max_digits digits).
    """
    if max_digits < 1:
        raise ValueError(f"max_digits must be >= 1, got {max_digits}")
    rng = seeded_rng(n, seed)
    digits = rng.integers(1, max_digits + 1, size=(n, 2))
    low = np.where(digits == 1, 0, 10 ** (digits - 1))
    operands = rng.integers(low, 10**digits)
    sources = [f"{a}+{b}" for a, b in operands.tolist()]
    return sources, [str(a + b) for a, b in operands.tolist()]


SEQ2SEQ_TASKS: dict[str, Callable[[int, Seed], tuple[list[str], list[str]]]] = {
    "copy": copy_task,
    "reverse": reverse_task,
    "sort": sort_task,
    "addition": addition_task,
}
