"""The options only one head kind reads: one frozen dataclass per such kind, checked when it is
built, and held by `HeadConfig` as a group named for the kind (`head.adaptive.cutoffs`).

These sit below both the config and the heads (as `seqjax.objective_config` does for the
objectives): `seqjax.kinds` names each kind's options class. A group's checks raise `ValueError`
naming the option by its name in the group; the config prefixes the group's path. Checks that
need the vocabulary (cutoffs < V, classes <= V) stay in the head's builder. Options a family of
heads reads (`head.tied`, `head.num_samples`, ...) stay flat in `HeadConfig`.
"""

from __future__ import annotations

import dataclasses

from seqjax.objective_config import check_int, check_number, check_one_of
from seqjax.options import option

TREES = ("huffman", "balanced")
BLOCK_RESIDUALS = ("auto", "bfloat16", "float32", "recompute")


@dataclasses.dataclass(frozen=True)
class FullOptions:
    """The full softmax's blocked loss and its z-loss."""

    chunk_size: int = option(
        0, "words per vocabulary block of the loss (>= V: materialized [N, V] logits; 0: chosen by shape)"
    )
    block_residuals: str = option(
        "auto",
        "what the blocked loss keeps for its backward pass: float32 | bfloat16 exponentials (three matmuls, "
        "N·V values; bfloat16 moves the gradients by up to 2^-8) or recompute (four matmuls, [N, chunk] memory); "
        "auto: exponentials at train.precision while they fit 1 GiB, else recompute",
        choices=BLOCK_RESIDUALS,
    )
    z_loss: float = option(0.0, "weight of PaLM's z-loss (log Z)² per token, keeping the normalizer near 1 (0: off)")

    def __post_init__(self) -> None:
        check_int("chunk_size", self.chunk_size, 0)
        check_one_of("block_residuals", self.block_residuals, BLOCK_RESIDUALS)
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

    tree: str = option("huffman", " | ".join(TREES), choices=TREES)

    def __post_init__(self) -> None:
        check_one_of("tree", self.tree, TREES)


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
