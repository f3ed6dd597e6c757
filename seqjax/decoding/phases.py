"""Decoding in phases over a growing state: a KV cache about as long as what it holds.

A step of a Transformer reads its whole cache, filled or not: decoding max_len steps into a
cache of C slots reads C slots at every step. The parts of a decode state marked
`GrowsWithSteps` are instead held cut to the slots the steps so far can reach, and grown
between phases: the loop is one `lax.while_loop` per phase, ending at steps
max_len / 2^k (k = ..., 1, 0; no phase shorter than `MIN_PHASE` steps), so a step reads on
average about 1.4 times the filled slots rather than C, for a few more loop bodies to
compile (log2(max_len / 16) + 1). A state without such parts runs as one loop.

Measured on a 2-core CPU with a D = 512, 4-layer LM decoding 32 rows for 128 steps: a step
14–23% faster, the compilation 0.7 → 1.8 s (greedy) and 0.9 → 2.3 s (beam 4).

The cut is safe because decoding is only valid when the state has room for every step:
positions filled before decoding (a prompt) plus max_len fit in C, so after `end` steps the
positions in use are below C - max_len + end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax import lax

from seqjax.contracts import GrowsWithSteps

MIN_PHASE = 16


def phase_ends(max_len: int) -> tuple[int, ...]:
    """The steps at which the phases end, ascending: max_len halved (rounded up) while the
    half is at least MIN_PHASE; 128 -> (16, 32, 64, 128), 100 -> (25, 50, 100), 20 -> (20,)."""
    ends = [max_len]
    while -(-ends[0] // 2) >= MIN_PHASE:
        ends.insert(0, -(-ends[0] // 2))
    return tuple(ends)


def _growing(node: Any) -> bool:
    return isinstance(node, GrowsWithSteps)


def state_capacity(state: Any) -> int | None:
    """The full capacity C of the state's `GrowsWithSteps` parts (before any beam search
    grows them), or None when it has none.

    Raises:
      ValueError: when the parts differ in size along their positions axes.
    """
    sizes = {
        leaf.shape[node.axis]
        for node in jax.tree.leaves(state, is_leaf=_growing)
        if _growing(node)
        for leaf in jax.tree.leaves(node.value)
    }
    if len(sizes) > 1:
        raise ValueError(f"the decode state's GrowsWithSteps parts must share one capacity, got sizes {sorted(sizes)}")
    return sizes.pop() if sizes else None


def check_capacity(state: Any, max_len: int) -> None:
    """Host check: the state's `GrowsWithSteps` parts hold at least max_len positions."""
    capacity = state_capacity(state)
    if capacity is not None and capacity < max_len:
        raise ValueError(
            f"the decode state holds {capacity} positions, fewer than max_len={max_len} steps write; "
            f"build it for at least the positions already filled plus max_len"
        )


def _resized(state: Any, capacity: int, new_capacity: int) -> Any:
    if new_capacity == capacity:
        return state
    return jax.tree.map(lambda n: n.resized(capacity, new_capacity) if _growing(n) else n, state, is_leaf=_growing)


def phased_while_loop(
    keep_going: Callable[[tuple], jax.Array],
    step: Callable[[tuple], tuple],
    carry: tuple,
    *,
    capacity: int | None,
    max_len: int,
) -> tuple:
    """`lax.while_loop(keep_going, step, carry)` run in phases.

    Args:
      keep_going, step: as for `lax.while_loop`, over a carry (t [] int32 the steps taken, ...,
        state) whose last element is the decode state.
      carry: the initial carry, t = 0.
      capacity: the full capacity of the state's `GrowsWithSteps` parts (`state_capacity` of
        the state the decoder was given), None for one plain loop.
      max_len: the decoder's steps at most (capacity >= max_len).
    Returns:
      the final carry, its state's parts back at their full capacity.
    """
    if capacity is None:
        return lax.while_loop(keep_going, step, carry)
    held = capacity
    for end in phase_ends(max_len):
        # The positions in use stay below C - max_len + end (C again in the last phase).
        reach = capacity - max_len + end
        carry = (*carry[:-1], _resized(carry[-1], held, reach))
        held = reach

        def within_phase(carry: tuple, end: int = end) -> jax.Array:
            result: jax.Array = keep_going(carry) & (carry[0] < end)
            return result

        carry = lax.while_loop(within_phase, step, carry)
    return carry
