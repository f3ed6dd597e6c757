"""`build_head`: the head a `HeadConfig` names, with its host-built structures, validated once.

Each kind registers its builder, its own options (the group `head.<kind>`) and the families of
shared options it reads with `HEADS.register` (`seqjax.config.kinds`)."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable
from typing import Any, Literal

import flax.linen as nn
import numpy as np
from jax.typing import ArrayLike

from seqjax.checks import check_int, check_number, check_one_of
from seqjax.config import HEADS, HeadConfig, option
from seqjax.config.sections import Proposal
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import checks, full, modules, samplers
from seqjax.heads.classes import frequency_classes
from seqjax.heads.full_head import FullSoftmax
from seqjax.heads.tree import balanced_tree, huffman_tree

# A head kind's builder: (its config, V, the [V] training counts, the run's train.precision) -> the
# head module; it checks the options of its kind on the host.
HeadBuilder = Callable[[HeadConfig, int, np.ndarray, str], nn.Module]


TreeShape = Literal["huffman", "balanced"]
BlockResiduals = Literal["auto", "bfloat16", "float32", "recompute"]


@dataclasses.dataclass(frozen=True)
class FullOptions:
    """The full softmax's blocked loss and its z-loss."""

    chunk_size: int = option(
        0, "words per vocabulary block of the loss (>= V: materialized [N, V] logits; 0: chosen by shape)"
    )
    block_residuals: BlockResiduals = option(
        "auto",
        "what the blocked loss keeps for its backward pass: float32 | bfloat16 exponentials (three matmuls, "
        "N·V values; bfloat16 moves the gradients by up to 2^-8) or recompute (four matmuls, [N, chunk] memory); "
        "auto: exponentials at train.precision while they fit 1 GiB, else recompute",
    )
    z_loss: float = option(0.0, "weight of PaLM's z-loss (log Z)² per token, keeping the normalizer near 1 (0: off)")

    def __post_init__(self) -> None:
        check_int("chunk_size", self.chunk_size, 0)
        check_one_of("block_residuals", self.block_residuals, typing.get_args(BlockResiduals))
        check_number("z_loss", self.z_loss, 0.0)


@dataclasses.dataclass(frozen=True)
class SampledOptions:
    """Sampled softmax's treatment of a sample equal to the target."""

    remove_accidental_hits: bool = option(True, "a sample equal to the target is not a negative")


@dataclasses.dataclass(frozen=True)
class NCEOptions:
    """NCE's normalizer, fixed or learned."""

    log_normalizer: float = option(0.0, "log Z (the initial value when learned)")
    learn_normalizer: bool = option(False, "learn log Z instead of fixing it")


@dataclasses.dataclass(frozen=True)
class TreeOptions:
    """The hierarchical softmax's tree."""

    tree: TreeShape = option("huffman", "huffman | balanced")

    def __post_init__(self) -> None:
        check_one_of("tree", self.tree, typing.get_args(TreeShape))


@dataclasses.dataclass(frozen=True)
class ClassOptions:
    """The class-factored softmax's number of frequency classes."""

    num_classes: int = option(0, "number of classes, 0 for ceil(sqrt(V))")

    def __post_init__(self) -> None:
        check_int("num_classes", self.num_classes, 0)


@dataclasses.dataclass(frozen=True)
class AdaptiveOptions:
    """The adaptive softmax's clusters."""

    cutoffs: tuple[int, ...] = option((), "increasing, < V: shortlist end, then cluster starts")
    div_value: float = option(4.0, "tail cluster i projects to D / div_value^i")
    head_bias: bool = option(False, "a bias on the head (shortlist + cluster) scores, as torch's head_bias")

    def __post_init__(self) -> None:
        check_number("div_value", self.div_value, 1.0)


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
      >>> from seqjax.heads.build import AdaptiveOptions
      >>> from seqjax.heads import build_head
      >>> cfg = HeadConfig(kind="adaptive", groups=(AdaptiveOptions(cutoffs=(10,), head_bias=True),))
      >>> head = build_head(cfg, 30, np.arange(30, 0, -1))
      >>> type(head).__name__, head.cutoffs, head.head_bias
      ('AdaptiveSoftmax', (10,), True)
    """
    builder = HEADS[cfg.kind].build
    vocab_size = check_int("vocab_size", vocab_size)
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
    counts = np.asarray(counts)
    if counts.shape != (vocab_size,) or not np.issubdtype(counts.dtype, np.number) or np.any(counts < 0):
        raise ValueError(
            f"counts must be [vocab_size={vocab_size}] non-negative numbers, got shape {counts.shape} "
            f"with minimum {counts.min() if counts.size else None}"
        )
    check_one_of("precision", precision, tuple(full.KEPT_BYTES))
    return builder(cfg, vocab_size, counts, precision)


def _smoothed(counts: np.ndarray) -> np.ndarray:
    return counts.astype(np.float64) + 1.0


def _full(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    options = cfg.options_of(FullOptions)
    return FullSoftmax(
        vocab_size,
        tied=cfg.tied,
        learn_bias=cfg.learn_bias,
        chunk_size=options.chunk_size,
        z_loss=options.z_loss,
        block_residuals="" if options.block_residuals == "auto" else options.block_residuals,
        precision=precision,
    )


def _class(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    num_classes = cfg.options_of(ClassOptions).num_classes or math.ceil(math.sqrt(vocab_size))
    if not 0 < num_classes <= vocab_size:
        raise ValueError(
            f"head.class.num_classes must be in [0, vocab_size={vocab_size}] (0: ceil(sqrt(V))), "
            f"got {cfg.options_of(ClassOptions).num_classes}"
        )
    return modules.ClassSoftmax(vocab_size, classes=frequency_classes(_smoothed(counts), num_classes), tied=cfg.tied)


def _tree(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    if cfg.tied:
        raise ValueError("head.tied must be false for head.kind=tree: tree nodes are not words, got true")
    huffman = cfg.options_of(TreeOptions).tree == "huffman"
    built = huffman_tree(_smoothed(counts)) if huffman else balanced_tree(vocab_size)
    return modules.HierarchicalSoftmax(vocab_size, tree=built)


def _adaptive(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    adaptive = cfg.options_of(AdaptiveOptions)
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
    check_one_of("head.proposal", cfg.proposal, typing.get_args(Proposal))
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
    hits = cfg.options_of(SampledOptions).remove_accidental_hits
    return modules.SampledSoftmax(vocab_size, unique=cfg.unique, remove_accidental_hits=hits, **shared)


def _nce(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    shared = _sampling_options(cfg, vocab_size, counts)
    return modules.NCE(
        vocab_size,
        unique=cfg.unique,
        log_normalizer=cfg.options_of(NCEOptions).log_normalizer,
        learn_normalizer=cfg.options_of(NCEOptions).learn_normalizer,
        **shared,
    )


def _negative(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> nn.Module:
    return modules.NegativeSampling(vocab_size, **_sampling_options(cfg, vocab_size, counts))


HEADS.register("full", _full, options=FullOptions, families=("tied", "word_bias", "vocab_parallel"))
HEADS.register("sampled", _sampled, options=SampledOptions, families=("tied", "word_bias", "sampling"))
HEADS.register("nce", _nce, options=NCEOptions, families=("tied", "word_bias", "sampling"))
HEADS.register("negative", _negative, families=("tied", "word_bias", "sampling"))
HEADS.register("class", _class, options=ClassOptions, families=("tied",))
HEADS.register("tree", _tree, options=TreeOptions)
HEADS.register("adaptive", _adaptive, options=AdaptiveOptions, families=("tied",))
