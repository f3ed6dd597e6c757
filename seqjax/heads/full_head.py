"""The full-softmax head kind (`head.kind=full`): exact scores over every word, its training loss
in vocabulary blocks (`full.full_softmax_loss`) or, under train.vocab_parallel, split over the
vocabulary across the mesh's model axis (`vocab_parallel.vocab_parallel_softmax_loss`); its
options `head.full.*`.

The blocked loss has a module of its own (`full.py`): every word-scoring head evaluates with it.
Where that loss would score its blocks twice (`block_residuals=auto` and the exponentials too
large to keep: four matmuls), the head trains on its masked mean with the gradients made in the
forward pass over blocks of rows (`full_mean.mean_softmax_loss`, three matmuls, [R, V] memory).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from jax import Array
from jax.sharding import Mesh

from seqjax.checks import integer, number
from seqjax.config import HEADS, HeadConfig, Options, option
from seqjax.heads import full
from seqjax.heads.base import WordScores
from seqjax.heads.full_mean import mean_softmax_loss
from seqjax.heads.vocab_parallel import vocab_parallel_softmax_loss
from seqjax.placement import device_rows

BlockResiduals = Literal["auto", "bfloat16", "float32", "recompute"]


@dataclasses.dataclass(frozen=True)
class FullOptions(Options):
    """The full softmax's blocked loss and its z-loss."""

    chunk_size: int = option(
        0,
        "words per vocabulary block of the loss (>= V: materialized [N, V] logits; 0: chosen by shape)",
        check=integer(0),
    )
    block_residuals: BlockResiduals = option(
        "auto",
        "what the blocked loss keeps for its backward pass: float32 | bfloat16 exponentials (three matmuls, "
        "N·V values; bfloat16 moves the gradients by up to 2^-8) or recompute (four matmuls, [N, chunk] memory); "
        "auto: exponentials at train.precision while they fit 1 GiB, else the gradients made in the forward "
        "pass over blocks of rows (three matmuls, [rows, V] memory)",
    )
    z_loss: float = option(
        0.0, "weight of PaLM's z-loss (log Z)² per token, keeping the normalizer near 1 (0: off)", check=number(0.0)
    )


class FullSoftmax(WordScores):
    """Exact softmax; `chunk_size` C > 0 scores the vocabulary in blocks of C words (C >= V:
    materialized [N, V] logits), 0 lets `full_softmax_loss` choose by shape; `z_loss` > 0 adds
    z_loss · (log Z)² to each row's training loss (not to `log_probs`); `block_residuals` is what
    the blocked loss keeps for its backward pass (`full.BLOCK_RESIDUALS`; "": exponentials at
    `precision`, the run's matmul precision, while they fit, `full.default_block_residuals`, and
    where they do not, a training loss over blocks of rows, `full_mean`)."""

    chunk_size: int = 0
    z_loss: float = 0.0
    block_residuals: str = ""
    precision: str = "float32"

    def fused_mean_loss(
        self, hidden: Array, targets: Array, mask: Array | None, embedding: Array | None
    ) -> tuple[Array, dict[str, Array]] | None:
        rows = device_rows(hidden.shape[0])  # the choices are of each device's memory
        blocked = (self.chunk_size or full.default_chunk_size(rows, self.vocab_size)) < self.vocab_size
        kept = full.default_block_residuals(rows, self.vocab_size, self.precision)
        if not blocked or self.block_residuals or kept != "recompute":
            return None
        params = self.parameters(hidden.shape[-1], embedding)
        return mean_softmax_loss(hidden, params["weights"], params["biases"], targets, mask, z_loss=self.z_loss)

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        rows = device_rows(hidden.shape[0])  # the choices are of each device's memory
        chunks = self.chunk_size or full.default_chunk_size(rows, self.vocab_size)
        residuals = self.block_residuals or full.default_block_residuals(rows, self.vocab_size, self.precision)
        params = self.parameters(hidden.shape[-1], embedding)
        weights, biases = params["weights"], params["biases"]
        return full.full_softmax_loss(
            hidden, weights, biases, targets, chunk_size=chunks, z_loss=self.z_loss, block_residuals=residuals
        )

    def vocab_parallel(self, mesh: Mesh) -> VocabParallelSoftmax:
        """This head with its training loss split over the vocabulary on `mesh`'s model axis
        (train.vocab_parallel): the same parameters, so checkpoints move between the two."""
        if self.z_loss:
            raise ValueError(f"head.full.z_loss is not computed by train.vocab_parallel's loss, got {self.z_loss}")
        # parent=None: made inside a method of this module, it would otherwise be bound as its child.
        return VocabParallelSoftmax(
            vocab_size=self.vocab_size, tied=self.tied, learn_bias=self.learn_bias, mesh=mesh, parent=None
        )


class VocabParallelSoftmax(WordScores):
    """The full-softmax head with a vocabulary-parallel training loss.

    Same parameters as `FullSoftmax` (`weights` [V, D], `biases` [V], or the tied input
    embedding), so checkpoints move freely between the two; `log_probs` (decoding needs every
    word's probability) and `target_log_probs` (exact evaluation, in vocabulary blocks) are
    those of `WordScores`.
    """

    mesh: Mesh | None = None
    vocab_axis: str = "model"
    row_axis: str | None = "data"

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        if self.mesh is None:
            raise ValueError("VocabParallelSoftmax needs the mesh its vocabulary is split over, got None")
        params = self.parameters(hidden.shape[-1], embedding)
        weights, biases = params["weights"], params["biases"]
        return vocab_parallel_softmax_loss(
            hidden, weights, biases, targets, self.mesh, vocab_axis=self.vocab_axis, row_axis=self.row_axis
        )


def _build(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> FullSoftmax:
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


HEADS.register("full", _build, options=FullOptions, families=("tied", "word_bias", "vocab_parallel"))
