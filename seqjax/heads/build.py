"""`build_head`: the head a `HeadConfig` names, with its host-built structures, validated once.

Each kind registers its builder, its own options (the group `head.<kind>`) and the families of
shared options it reads with one `HEADS.register` call in its own module (`seqjax.heads.tree`:
`HEADS.register("tree", _build, options=TreeOptions)`); `build_head` checks what every kind
receives and calls the kind's builder.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import numpy as np
from jax.typing import ArrayLike

from seqjax.checks import check_int, check_one_of
from seqjax.config import HEADS, HeadConfig
from seqjax.heads import full

# A head kind's builder: (its config, V, the [V] training counts, the run's train.precision) -> the
# head module; it checks the options of its kind on the host.
HeadBuilder = Callable[[HeadConfig, int, np.ndarray, str], nn.Module]


def build_head(cfg: HeadConfig, vocab_size: int, counts: ArrayLike, precision: str = "float32") -> nn.Module:
    """Returns the Flax head module for `cfg` (see `seqjax.heads.base` for its contract).

    Args:
      cfg: the head section of the experiment config.
      vocab_size: V >= 2.
      counts: [V] int training unigram counts of the frequency-sorted vocabulary (the first
        `SPECIAL_IDS.count` ids are the specials and may count 0; the ids after them are
        sorted by decreasing count). Samplers, trees and classes use counts + 1, so that every
        word has positive mass.
      precision: the run's train.precision, "float32" or "bfloat16" (its matmuls; heads score in
        float32 either way): under `head.full.block_residuals=auto` the full softmax's blocks keep
        their exponentials in it (`full.default_block_residuals`).

    Raises:
      ValueError: an unknown kind or proposal, K outside (0, V), cutoffs outside (0, V), classes over V,
        counts of the wrong length or negative, unsorted counts for the log-uniform proposal,
        or tying a head whose output rows are not words (the tree head).

    Example:
      >>> import numpy as np
      >>> from seqjax.config import HeadConfig
      >>> from seqjax.heads import AdaptiveOptions, build_head
      >>> cfg = HeadConfig(kind="adaptive", groups=(AdaptiveOptions(cutoffs=(10,), head_bias=True),))
      >>> head = build_head(cfg, 30, np.arange(30, 0, -1))
      >>> type(head).__name__, head.cutoffs, head.head_bias
      ('AdaptiveSoftmax', (10,), True)
    """
    builder: HeadBuilder = HEADS[cfg.kind].build
    vocab_size = check_int("vocab_size", vocab_size, 2)
    counts = np.asarray(counts)
    if counts.shape != (vocab_size,) or not np.issubdtype(counts.dtype, np.number) or np.any(counts < 0):
        raise ValueError(
            f"counts must be [vocab_size={vocab_size}] non-negative numbers, got shape {counts.shape} "
            f"with minimum {counts.min() if counts.size else None}"
        )
    check_one_of("precision", precision, tuple(full.KEPT_BYTES))
    return builder(cfg, vocab_size, counts, precision)
