"""Seeds of the generated data: an int or a tuple of ints (e.g. `(seed, split)`), checked and
turned into a numpy generator, so that the same seed gives the same data on every machine."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Seed = int | Sequence[int]


def seeded_rng(n: int, seed: Seed) -> np.random.Generator:
    """The generator of `seed`, after checking `seed` and the count `n` of examples to draw."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    seeds = [seed] if isinstance(seed, (int, np.integer)) else list(seed)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in seeds):
        raise ValueError(f"seed must be an int >= 0 or a tuple of them, got {seed!r}")
    return np.random.default_rng(seeds)
