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
from seqjax.config import BLOCK_RESIDUALS, PROPOSALS, TREES, HeadConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import checks, samplers
from seqjax.heads.classes import frequency_classes
from seqjax.heads.modules import (
    NCE,
    AdaptiveSoftmax,
    ClassSoftmax,
    FullSoftmax,
    HierarchicalSoftmax,
    NegativeSampling,
    SampledSoftmax,
)
from seqjax.heads.tree import balanced_tree, huffman_tree

# Heads whose loss `train.vocab_parallel` splits over the model axis (`vocab_parallel.py`).
VOCAB_PARALLEL_HEADS = ("full",)

# A head kind's builder: (its config, V, the [V] training counts) -> the head module; it checks the
# options of its kind on the host.
HeadBuilder = Callable[[HeadConfig, int, np.ndarray], nn.Module]


def build_head(cfg: HeadConfig, vocab_size: int, counts: ArrayLike) -> nn.Module:
    """Returns the Flax head module for `cfg` (see `seqjax.heads.modules` for its contract).

    Args:
      cfg: the head section of the experiment config.
      vocab_size: V >= 2.
      counts: [V] int training unigram counts of the frequency-sorted vocabulary (the first
        `SPECIAL_IDS.count` ids are the specials and may count 0; the ids after them are
        sorted by decreasing count). Samplers, trees and classes use counts + 1, so that every
        word has positive mass.

    Raises:
      ValueError: an unknown kind/proposal/tree, K outside (0, V), bad cutoffs or div_value,
        counts of the wrong length or negative, unsorted counts for the log-uniform proposal,
        or tying a head whose output rows are not words (the tree head).

    Example:
      >>> import numpy as np
      >>> from seqjax.config import HeadConfig
      >>> from seqjax.heads import build_head
      >>> head = build_head(HeadConfig(kind="adaptive", cutoffs=(10,), head_bias=True), 30, np.arange(30, 0, -1))
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
    return HEAD_BUILDERS[cfg.kind](cfg, vocab_size, counts)


def register_head(kind: str, builder: HeadBuilder, families: tuple[str, ...] = ()) -> None:
    """Adds `head.kind=kind`, built by `builder` and reading the `families` of options
    (`seqjax.kinds`), to validation, the config text and `build_head` at once. Raises ValueError
    for a name already taken."""
    kinds.HEADS.add(kind, families)
    HEAD_BUILDERS[kind] = builder


def _smoothed(counts: np.ndarray) -> np.ndarray:
    return counts.astype(np.float64) + 1.0


def _full(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> nn.Module:
    if cfg.chunk_size < 0:
        raise ValueError(f"head.chunk_size must be >= 0 (0: chosen by shape), got {cfg.chunk_size}")
    if isinstance(cfg.z_loss, bool) or not 0.0 <= cfg.z_loss < float("inf"):
        raise ValueError(f"head.z_loss must be a finite float >= 0 (0: off), got {cfg.z_loss!r}")
    if cfg.block_residuals not in BLOCK_RESIDUALS:
        raise ValueError(
            f"head.block_residuals must be one of {', '.join(BLOCK_RESIDUALS)}, got {cfg.block_residuals!r}"
        )
    return FullSoftmax(
        vocab_size,
        tied=cfg.tied,
        learn_bias=cfg.learn_bias,
        chunk_size=cfg.chunk_size,
        z_loss=cfg.z_loss,
        block_residuals="" if cfg.block_residuals == "auto" else cfg.block_residuals,
    )


def _class(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> nn.Module:
    num_classes = cfg.num_classes or math.ceil(math.sqrt(vocab_size))
    if not 0 < num_classes <= vocab_size:
        raise ValueError(
            f"head.num_classes must be in [0, vocab_size={vocab_size}] (0: ceil(sqrt(V))), got {cfg.num_classes}"
        )
    return ClassSoftmax(vocab_size, classes=frequency_classes(_smoothed(counts), num_classes), tied=cfg.tied)


def _tree(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> nn.Module:
    if cfg.tied:
        raise ValueError("head.tied must be false for head.kind=tree: tree nodes are not words, got true")
    if cfg.tree not in TREES:
        raise ValueError(f"head.tree must be one of {', '.join(TREES)}, got {cfg.tree!r}")
    built = huffman_tree(_smoothed(counts)) if cfg.tree == "huffman" else balanced_tree(vocab_size)
    return HierarchicalSoftmax(vocab_size, tree=built)


def _adaptive(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> nn.Module:
    cutoffs = checks.require_cutoffs("head.cutoffs", cfg.cutoffs, vocab_size)
    if not cfg.div_value >= 1.0:
        raise ValueError(f"head.div_value must be >= 1, got {cfg.div_value}")
    smoothed = _smoothed(counts)
    shares = np.add.reduceat(smoothed, np.array(cutoffs)) / smoothed.sum()  # one sum from each tail's start
    return AdaptiveSoftmax(
        vocab_size,
        cutoffs=cutoffs,
        div_value=cfg.div_value,
        tied=cfg.tied,
        head_bias=cfg.head_bias,
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


def _sampled(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> nn.Module:
    shared = _sampling_options(cfg, vocab_size, counts)
    return SampledSoftmax(vocab_size, unique=cfg.unique, remove_accidental_hits=cfg.remove_accidental_hits, **shared)


def _nce(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> nn.Module:
    shared = _sampling_options(cfg, vocab_size, counts)
    return NCE(
        vocab_size,
        unique=cfg.unique,
        log_normalizer=cfg.log_normalizer,
        learn_normalizer=cfg.learn_normalizer,
        **shared,
    )


def _negative(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> nn.Module:
    return NegativeSampling(vocab_size, **_sampling_options(cfg, vocab_size, counts))


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
