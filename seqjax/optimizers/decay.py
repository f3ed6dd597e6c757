"""Which parameters weight decay shrinks (`optim.decay`), one rule for every optimizer.

`all` decays every parameter. `matrices` decays the weights and embeddings only — the usual
choice (GPT-2, T5, LLaMA): a parameter decays when it has two dimensions or more and its name
(the last key of its path) says neither bias nor scale. Biases and norm scales set offsets and
gains, not capacity, and a stacked one (a layer stack of `model.scan_layers`, the attention's
[3, H, Dh] bias) is still a bias, hence the name as well as the rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax


def is_matrix(path: Sequence[Any], leaf: Any) -> bool:
    """Whether the parameter at `path` (a pytree key path) with `leaf`'s shape is a weight or
    an embedding: two dimensions or more, named neither *bias* nor *scale*."""
    name = str(getattr(path[-1], "key", getattr(path[-1], "name", ""))) if path else ""
    return len(leaf.shape) >= 2 and "bias" not in name and name != "scale"


def decay_mask(rule: str) -> Callable[[Any], Any] | None:
    """optax's weight-decay mask for `optim.decay` = `rule`: None (every parameter) for `all`,
    else params -> a tree of bools, True where the parameter decays."""
    if rule == "all":
        return None

    def mask(params: Any) -> Any:
        return jax.tree_util.tree_map_with_path(is_matrix, params)

    return mask
