"""`build_head`: the head a `HeadConfig` names, with its host-built structures, validated once.

`HEAD_BUILDERS` maps each `head.kind` (named in `seqjax.kinds.HEADS`) to its builder;
`register_head` adds a kind to both."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import numpy as np
from jax.typing import ArrayLike

from seqjax import kinds
from seqjax.config import PROPOSALS, HeadConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import checks, full, modules, samplers
from seqjax.heads.classes import frequency_classes
from seqjax.heads.tree import balanced_tree, huffman_tree

# Heads whose loss `train.vocab_parallel` splits over the model axis (`vocab_parallel.py`).
VOCAB_PARALLEL_HEADS = ("full",)

# A head kind's builder: (its config, V, the [V] training counts, the run's train.precision) -> the
# head module; it checks the options of its kind on the host.
HeadBuilder = Callable[[HeadConfig, int, np.ndarray, str], nn.Module]


def build_head(cfg: HeadConfig, vocab_size: int, counts: ArrayLike, precision: str = "float32") -> nn.Module:
    """Returns the Flax head module for `cfg` (see `seqjax.heads.modules` for its contract).

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
      >>> from seqjax.head_options import AdaptiveOptions
      >>> from seqjax.heads import build_head
      >>> cfg = HeadConfig(kind="adaptive", groups=(AdaptiveOptions(cutoffs=(10,), head_bias=True),))
      >>> head = build_head(cfg, 30, np.arange(30, 0, -1))
      >>> type(head).__name__, head.cutoffs, head.head_bias
      ('AdaptiveSoftmax', (10,), True)
    """
    if cfg.kind not in HEAD_BUILDERS:
        raise ValueError(f"head.kind must be one of {', '.join(HEAD_BUILDERS)}, got {cfg.kind!r}")
    vocab_size = checks.require_positive_int("vocab_size", vocab_size)
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
    counts = np.asarray(counts)
    if counts.shape != (vocab_size,) or not np.issubdtype(counts.dtype, np.number) or np.any(counts < 0):
        raise ValueError(
            f"counts must be [vocab_size={vocab_size}] non-negative numbers, got shape {counts.shape} "
            f"with minimum {counts.min() if counts.size else None}"
        )
    if precision not in full.KEPT_BYTES:
        raise ValueError(f"precision must be one of {', '.join(full.KEPT_BYTES)}, got {precision!r}")
    return HEAD_BUILDERS[cfg.kind](cfg, vocab_size, counts, precision)


def register_head(kind: str, builder: HeadBuilder, families: tuple[str, ...] = (), options: type | None = None) -> None:
    """Adds `head.kind=kind`, built by `builder`, reading the `families` of options and its own
    `options` (a frozen dataclass, the group `head.<kind>`; `seqjax.kinds`), to validation, the
    config text and `build_head` at once. Raises ValueError for a name already taken."""
    kinds.HEADS.add(kind, families, options)
    HEAD_BUILDERS[kind] = builder


def _smoothed(counts: np.ndarray) -> np.ndarray:
    return counts.astype(np.float64) + 1.0


def _full(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    options = cfg.full
    return modules.FullSoftmax(
        vocab_size,
        tied=cfg.tied,
        learn_bias=cfg.learn_bias,
        chunk_size=options.chunk_size,
        z_loss=options.z_loss,
        block_residuals="" if options.block_residuals == "auto" else options.block_residuals,
        precision=precision,
    )


def _class(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    num_classes = cfg.class_.num_classes or math.ceil(math.sqrt(vocab_size))
    if not 0 < num_classes <= vocab_size:
        raise ValueError(
            f"head.class.num_classes must be in [0, vocab_size={vocab_size}] (0: ceil(sqrt(V))), "
            f"got {cfg.class_.num_classes}"
        )
    return modules.ClassSoftmax(vocab_size, classes=frequency_classes(_smoothed(counts), num_classes), tied=cfg.tied)


def _tree(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    if cfg.tied:
        raise ValueError("head.tied must be false for head.kind=tree: tree nodes are not words, got true")
    built = huffman_tree(_smoothed(counts)) if cfg.tree.tree == "huffman" else balanced_tree(vocab_size)
    return modules.HierarchicalSoftmax(vocab_size, tree=built)


def _adaptive(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    adaptive = cfg.adaptive
    cutoffs = checks.require_cutoffs("head.adaptive.cutoffs", adaptive.cutoffs, vocab_size)
    smoothed = _smoothed(counts)
    shares = np.add.reduceat(smoothed, np.array(cutoffs)) / smoothed.sum()  # one sum from each tail's start
    return modules.AdaptiveSoftmax(
        vocab_size,
        cutoffs=cutoffs,
        div_value=adaptive.div_value,
        tied=cfg.tied,
        head_bias=adaptive.head_bias,
        tail_shares=tuple(float(share) for share in shares),
    )


def _sampling_options(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> dict[str, Any]:
    """The options every sampling head takes: its proposal, K and how it is drawn, checked."""
    if not 0 < cfg.num_samples < vocab_size:
        raise ValueError(f"head.num_samples must be in (0, vocab_size={vocab_size}), got {cfg.num_samples}")
    if cfg.proposal not in PROPOSALS:
        raise ValueError(f"head.proposal must be one of {', '.join(PROPOSALS)}, got {cfg.proposal!r}")
    if cfg.proposal == "uniform":
        sampler = samplers.uniform(vocab_size)
    elif cfg.proposal == "unigram":
        if isinstance(cfg.power, bool) or not 0.0 <= cfg.power < math.inf:
            raise ValueError(f"head.power must be a finite number >= 0, got {cfg.power!r}")
        sampler = samplers.unigram(_smoothed(counts), power=cfg.power)
    else:
        samplers.require_frequency_sorted(counts, num_leading=min(SPECIAL_IDS.count, vocab_size))
        sampler = samplers.log_uniform(vocab_size)
    return dict(
        tied=cfg.tied,
        learn_bias=cfg.learn_bias,
        sampler=sampler,
        num_samples=cfg.num_samples,
        per_row_samples=cfg.per_row_samples,
    )


def _sampled(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    shared = _sampling_options(cfg, vocab_size, counts)
    hits = cfg.sampled.remove_accidental_hits
    return modules.SampledSoftmax(vocab_size, unique=cfg.unique, remove_accidental_hits=hits, **shared)


def _nce(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    shared = _sampling_options(cfg, vocab_size, counts)
    return modules.NCE(
        vocab_size,
        unique=cfg.unique,
        log_normalizer=cfg.nce.log_normalizer,
        learn_normalizer=cfg.nce.learn_normalizer,
        **shared,
    )


def _negative(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    return modules.NegativeSampling(vocab_size, **_sampling_options(cfg, vocab_size, counts))


# head.kind (named in `seqjax.kinds.HEADS`) -> its builder
HEAD_BUILDERS: dict[str, HeadBuilder] = {
    "full": _full,
    "sampled": _sampled,
    "nce": _nce,
    "negative": _negative,
    "class": _class,
    "tree": _tree,
    "adaptive": _adaptive,
}
