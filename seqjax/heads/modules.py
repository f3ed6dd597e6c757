"""Flax heads: each owns its output parameters and offers `loss` (training) and `log_probs`.

The head contract (`seqjax.contracts.Head`), for every head below:

    variables = head.init({"params": key}, hidden, targets, key, mask, embedding, method="loss")
    loss, aux = head.apply(variables, hidden, targets, key, mask, embedding, method="loss")
    log_probs = head.apply(variables, hidden, embedding, method="log_probs")
    target_log_probs = head.apply(variables, hidden, targets, embedding, method="target_log_probs")

hidden: [N, D] float (computed in float32); targets: [N] int32; key: a PRNG key (used by the
sampling heads); mask: [N] float32 or None; embedding: [V, D] input table or None.
`loss` (`LinenHead`'s, the same for every head) is the scalar float32
sum(mask · row_losses) / max(sum(mask), 1) with aux = {"tokens": sum(mask)}, where a head's
`row_losses` [N] are its exact NLL unless it trains on another loss; `log_probs` is the
exact normalized [N, V] float32 for every head, the sampling ones included (there the full
softmax over the same scores, plus the proposal's log q for negative sampling, whose scores
are not log-probabilities).
`target_log_probs` is [N] float32 log p(target | h) under that same distribution, without
the [N, V] matrix (what exact evaluation needs): the softmax heads' log-normalizer comes from
`full_softmax_loss` in blocks of `full.DEFAULT_CHUNK` words (memory O(N × block));
the class, tree and adaptive heads score the target's class, path or cluster only.

Tying (`tied=True`) replaces the head's [V, D] word vectors by the caller's `embedding`:
the word table of the full, sampled, NCE and negative-sampling heads, the word level of the
class-based head, the shortlist rows of the adaptive head. Tree nodes are not words, so the
tree head cannot be tied (`build_head` refuses it).
"""

from __future__ import annotations

import math
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.heads import checks, full
from seqjax.heads.adaptive import (
    adaptive_log_probs,
    adaptive_softmax_loss,
    expected_tail_capacities,
    tail_capacities,
    tail_dimensions,
)
from seqjax.heads.classes import Classes, class_log_probs, class_softmax_loss
from seqjax.heads.sampled import nce_loss, negative_sampling_loss, sampled_softmax_loss
from seqjax.heads.samplers import Sampler, Samples
from seqjax.heads.tree import Tree, tree_log_probs, tree_softmax_loss


def masked_mean(per_row: ArrayLike, mask: ArrayLike | None) -> tuple[Array, dict[str, Array]]:
    """(sum(mask · per_row) / max(sum(mask), 1), {"tokens": sum(mask)}), both [] float32.

    per_row: [N] float losses; mask: [N] float (1 keeps a row, 0 drops it) or None (all rows).
    A dropped row's loss may be inf or nan without reaching the mean.

    Example:
      >>> import jax.numpy as jnp
      >>> from seqjax.heads import masked_mean
      >>> loss, aux = masked_mean(jnp.array([1.0, 3.0, jnp.inf]), jnp.array([1.0, 1.0, 0.0]))
      >>> float(loss), float(aux["tokens"])
      (2.0, 2.0)
    """
    per_row = jnp.asarray(per_row, jnp.float32)
    mask = jnp.ones_like(per_row) if mask is None else jnp.asarray(mask, jnp.float32)
    tokens = mask.sum()
    # where, not a product: a padded row's loss may be inf, and 0 · inf is nan.
    total = jnp.where(mask > 0, mask * per_row, 0.0).sum()
    return total / jnp.maximum(tokens, 1.0), {"tokens": tokens}


def _normal(features: int) -> jax.nn.initializers.Initializer:
    # Scores h·w stay O(1) at initialization when w has variance 1 / D.
    return nn.initializers.normal(stddev=features**-0.5)


def _word_table(module: nn.Module, name: str, rows: int, features: int, embedding: Array | None) -> Array:
    """The module's own [rows, D] table, or the first `rows` rows of a tied embedding."""
    if not module.tied:
        return module.param(name, _normal(features), (rows, features), jnp.float32)
    if embedding is None:
        raise ValueError(f"{type(module).__name__} is tied: pass the input embedding [V, D], got None")
    if embedding.ndim != 2 or embedding.shape != (module.vocab_size, features):
        raise ValueError(f"embedding must have shape [V={module.vocab_size}, D={features}], got {embedding.shape}")
    return jnp.asarray(embedding[:rows], jnp.float32)


def _word_parameters(
    module: nn.Module, features: int, embedding: Array | None, initial_bias: float = 0.0, learn_bias: bool = True
) -> dict[str, Array]:
    """[V, D] word vectors (own or tied) and [V] biases starting at `initial_bias`, which get no
    gradient unless `learn_bias`; call from a compact method."""
    weights = _word_table(module, "weights", module.vocab_size, features, embedding)  # drawn first, as ever
    biases = module.param("biases", nn.initializers.constant(initial_bias), (module.vocab_size,), jnp.float32)
    return {"weights": weights, "biases": biases if learn_bias else jax.lax.stop_gradient(biases)}


class LinenHead(nn.Module):
    """The base of the Linen heads: the contract's `loss`, the masked mean of `row_losses`,
    which are the exact NLL −`target_log_probs` unless a head trains on another loss."""

    def loss(
        self,
        hidden: Array,
        targets: Array,
        key: Array | None = None,
        mask: Array | None = None,
        embedding: Array | None = None,
    ) -> tuple[Array, dict[str, Array]]:
        return masked_mean(self.row_losses(hidden, targets, key, embedding), mask)

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        """[N] float32 training loss of each row (key: what a sampling head draws from)."""
        return -self.target_log_probs(hidden, targets, embedding)

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        """[N] float32 log p(target | h) under the head's exact distribution."""
        raise NotImplementedError(f"{type(self).__name__} must define target_log_probs")


class WordScores(LinenHead):
    """Heads that score words with one [V, D] table and [V] biases; exact log-probs over them.

    `learn_bias` false keeps the biases where they start (a zero gradient; a pretrained model
    without output biases keeps its far-negative biases of the ids it has no token for)."""

    vocab_size: int
    tied: bool = False
    learn_bias: bool = True

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """Output weights multiplied per trained target token: every word's row."""
        return float(features * self.vocab_size)

    def initial_bias(self) -> float:
        """Where the word biases start: where the head's objective puts an uninformative model."""
        return 0.0

    @nn.compact
    def parameters(self, features: int, embedding: Array | None = None) -> dict:
        return _word_parameters(self, features, embedding, self.initial_bias(), self.learn_bias)

    def log_probs(self, hidden: Array, embedding: Array | None = None) -> Array:
        params = self.parameters(hidden.shape[-1], embedding)
        scores = self.scores(hidden, params)
        # Not jax.nn.log_softmax: XLA on CPU fused its row max and max-shifted copy into the
        # matmul's YNNPACK fusion, which then ran up to twice as slow; this form leaves the
        # matmul alone (decode steps 1-15% faster on 2 cores).
        return scores - jax.nn.logsumexp(scores, axis=-1, keepdims=True)

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        params = self.parameters(hidden.shape[-1], embedding)
        biases = self.score_biases(params)
        # Blocks whatever the shape: without gradients they beat materialized logits (full.py).
        return -full.full_softmax_loss(hidden, params["weights"], biases, targets, chunk_size=full.DEFAULT_CHUNK)

    def scores(self, hidden: Array, params: dict[str, Array]) -> Array:
        """[N, V] float32 h·w + `score_biases`."""
        return jnp.asarray(hidden, jnp.float32) @ params["weights"].T + self.score_biases(params)

    def score_biases(self, params: dict[str, Array]) -> Array:
        """[V] float32 added to h·w in the scores: the word biases."""
        return params["biases"]


class FullSoftmax(WordScores):
    """Exact softmax; `chunk_size` C > 0 scores the vocabulary in blocks of C words (C >= V:
    materialized [N, V] logits), 0 lets `full_softmax_loss` choose by shape; `z_loss` > 0 adds
    z_loss · (log Z)² to each row's training loss (not to `log_probs`); `block_residuals` is what
    the blocked loss keeps for its backward pass (`full.BLOCK_RESIDUALS`; "": exponentials at
    `precision`, the run's matmul precision, while they fit, `full.default_block_residuals`)."""

    chunk_size: int = 0
    z_loss: float = 0.0
    block_residuals: str = ""
    precision: str = "float32"

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        chunks, rows = self.chunk_size or None, hidden.shape[0]
        residuals = self.block_residuals or full.default_block_residuals(rows, self.vocab_size, self.precision)
        params = self.parameters(hidden.shape[-1], embedding)
        weights, biases = params["weights"], params["biases"]
        return full.full_softmax_loss(
            hidden, weights, biases, targets, chunk_size=chunks, z_loss=self.z_loss, block_residuals=residuals
        )


class _SamplingHead(WordScores):
    """Draws K samples from `sampler` per call (shared by the batch, or one draw per row)."""

    sampler: Sampler | None = None
    num_samples: int = 512
    unique: bool = True
    per_row_samples: bool = False

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """The target's row and the K samples' per trained token."""
        return float(features * (self.num_samples + 1))

    @property
    def proposal(self) -> Sampler:
        """The sampler; a field with a default only because the fields before it have one."""
        if self.sampler is None:
            raise ValueError(f"{type(self).__name__} needs a sampler, got None")
        return self.sampler

    def draw(self, key: Array | None, targets: Array) -> tuple[Samples, Array]:
        """Samples with their log expected counts, and the targets' log expected counts [N]."""
        if key is None:
            raise ValueError(f"{type(self).__name__} draws its samples from key: pass a PRNG key, got None")
        rows = targets.shape[0] if self.per_row_samples else None
        drawn = self.proposal.sample(key, self.num_samples, unique=self.unique, num_rows=rows)
        return drawn, self.proposal.log_expected_count(targets, self.num_samples, unique=self.unique)

    def loss_arguments(
        self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None
    ) -> tuple[dict[str, Array], tuple[Array, ...]]:
        """The parameters, and the positional arguments the sampled losses share: hidden,
        weights, biases, targets, the sample ids and both log expected counts."""
        params = self.parameters(hidden.shape[-1], embedding)
        drawn, target_counts = self.draw(key, targets)
        weights, biases = params["weights"], params["biases"]
        return params, (hidden, weights, biases, targets, drawn.ids, drawn.log_expected_counts, target_counts)


class SampledSoftmax(_SamplingHead):
    """Importance-sampled softmax (`sampled_softmax_loss`) for training; exact `log_probs`."""

    remove_accidental_hits: bool = True

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        _, arguments = self.loss_arguments(hidden, targets, key, embedding)
        return sampled_softmax_loss(*arguments, remove_accidental_hits=self.remove_accidental_hits)


class NCE(_SamplingHead):
    """Noise-contrastive estimation (`nce_loss`); log Z fixed, or a learned scalar parameter.

    NCE fits exp(s − log Z) as the normalized probability itself, so `log_probs` is the softmax
    of the scores. The biases start at log Z − log V, where that model is already normalized
    (uniform): from zero biases it would start with total mass V, and the K noise terms would
    spend the first epoch pushing every score down through clipped gradients (Zoph et al. 2016
    found this initialization essential; measured here: word-level Shakespeare, V = 31k).
    """

    log_normalizer: float = 0.0
    learn_normalizer: bool = False

    def initial_bias(self) -> float:
        return self.log_normalizer - math.log(self.vocab_size)

    @nn.compact
    def parameters(self, features: int, embedding: Array | None = None) -> dict:
        params = _word_parameters(self, features, embedding, self.initial_bias(), self.learn_bias)
        if self.learn_normalizer:
            init = nn.initializers.constant(self.log_normalizer)
            params["log_normalizer"] = self.param("log_normalizer", init, (), jnp.float32)
        else:
            params["log_normalizer"] = jnp.float32(self.log_normalizer)
        return params

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        params, arguments = self.loss_arguments(hidden, targets, key, embedding)
        return nce_loss(*arguments, log_normalizer=params["log_normalizer"])


class NegativeSampling(_SamplingHead):
    """word2vec's negative sampling (`negative_sampling_loss`), negatives drawn with replacement.

    Its optimum is s(w, h) = log p(w | h) − log(K q(w)) (a shifted PMI, not a log-probability),
    so the normalized distribution the head fits is p(w | h) ∝ q(w) · exp(s(w, h)): `log_probs`
    adds the proposal's log q before normalizing (a softmax of s alone would give p / q,
    renormalized, which favours rare words without bound). The biases start at −log K, that
    optimum when the model equals the proposal.
    """

    unique: bool = False

    def initial_bias(self) -> float:
        return -math.log(self.num_samples)

    def score_biases(self, params: dict[str, Array]) -> Array:
        """[V] float32 b + log q: with h·w, the log of the unnormalized distribution the head fits."""
        return params["biases"] + self.proposal.log_probs

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        params = self.parameters(hidden.shape[-1], embedding)
        drawn, _ = self.draw(key, targets)
        return negative_sampling_loss(hidden, params["weights"], params["biases"], targets, drawn.ids)


class ClassSoftmax(LinenHead):
    """Two-level class-based softmax over `classes`; tying applies to the word level."""

    vocab_size: int
    classes: Classes
    tied: bool = False

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """The class scores and the words of the target's class, expected over `frequencies` [V]."""
        sizes = np.asarray(self.classes.sizes)[np.asarray(self.classes.class_of)]
        return float(features * (len(self.classes.sizes) + np.dot(_normalized(frequencies), sizes)))

    @nn.compact
    def parameters(self, features: int, embedding: Array | None = None) -> dict:
        shape = (self.classes.num_classes, features)
        return {
            "class_weights": self.param("class_weights", _normal(features), shape, jnp.float32),
            "class_biases": self.param("class_biases", nn.initializers.zeros, shape[:1], jnp.float32),
            **_word_parameters(self, features, embedding),
        }

    def log_probs(self, hidden: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1], embedding)
        return class_log_probs(hidden, p["class_weights"], p["class_biases"], p["weights"], p["biases"], self.classes)

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1], embedding)
        return -class_softmax_loss(
            hidden, p["class_weights"], p["class_biases"], p["weights"], p["biases"], targets, self.classes
        )


class HierarchicalSoftmax(LinenHead):
    """Binary-tree softmax over `tree` (balanced or Huffman); V − 1 node vectors, never tied."""

    vocab_size: int
    tree: Tree
    tied: ClassVar[bool] = False  # tree nodes are not words: nothing to tie to

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """The nodes on the target's path, expected over `frequencies` [V]."""
        return float(features * np.dot(_normalized(frequencies), np.asarray(self.tree.mask).sum(axis=1)))

    @nn.compact
    def parameters(self, features: int) -> dict:
        nodes = self.vocab_size - 1
        return {
            "node_weights": self.param("node_weights", _normal(features), (nodes, features), jnp.float32),
            "node_biases": self.param("node_biases", nn.initializers.zeros, (nodes,), jnp.float32),
        }

    def log_probs(self, hidden: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1])
        return tree_log_probs(hidden, p["node_weights"], p["node_biases"], self.tree)

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1])
        return -tree_softmax_loss(hidden, p["node_weights"], p["node_biases"], targets, self.tree)


class AdaptiveSoftmax(LinenHead):
    """Adaptive softmax with `cutoffs` and `div_value`; tying applies to the shortlist rows.

    `head_bias` adds a [c_1 + n] bias to the head's scores (shortlist words and clusters),
    as PyTorch's `AdaptiveLogSoftmaxWithLoss(head_bias=True)`; off by default, as there.
    `tail_shares`, each tail cluster's expected share of the targets (from the train split's
    counts), sizes the rows each tail gathers for traced targets (`expected_tail_capacities`;
    concrete targets are counted on the host, `tail_capacities`), so that the tails keep their
    activations for the backward pass; () walks each tail's rows in blocks.
    """

    vocab_size: int
    cutoffs: tuple[int, ...] = ()
    div_value: float = 4.0
    tied: bool = False
    head_bias: bool = False
    tail_shares: tuple[float, ...] = ()

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """The head (shortlist and clusters), and for the targets of each tail cluster (their
        share of `frequencies` [V]) its projection and its words."""
        bounds = self.cutoffs + (self.vocab_size,)
        share = _normalized(frequencies)
        total = features * (self.cutoffs[0] + len(self.cutoffs))
        for index, width in enumerate(tail_dimensions(features, len(self.cutoffs), self.div_value)):
            size = bounds[index + 1] - bounds[index]
            total += share[bounds[index] : bounds[index + 1]].sum() * width * (features + size)
        return float(total)

    @nn.compact
    def parameters(self, features: int, embedding: Array | None = None) -> dict:
        shortlist, clusters = self.cutoffs[0], len(self.cutoffs)
        cluster_weights = self.param("cluster_weights", _normal(features), (clusters, features), jnp.float32)
        shortlist_weights = _word_table(self, "shortlist_weights", shortlist, features, embedding)
        head_biases = None
        if self.head_bias:
            head_biases = self.param("head_biases", nn.initializers.zeros, (shortlist + clusters,), jnp.float32)
        bounds = self.cutoffs + (self.vocab_size,)
        widths = tail_dimensions(features, clusters, self.div_value)
        projections, tails = [], []
        for index, width in enumerate(widths):
            projections.append(
                self.param(f"tail_projection_{index}", _normal(features), (features, width), jnp.float32)
            )
            size = bounds[index + 1] - bounds[index]
            tails.append(self.param(f"tail_weights_{index}", _normal(width), (size, width), jnp.float32))
        return {
            "head_weights": jnp.concatenate([shortlist_weights, cluster_weights], axis=0),
            "head_biases": head_biases,
            "tail_projections": projections,
            "tail_weights": tails,
        }

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1], embedding)
        capacities = None
        if self.tail_shares and checks.is_concrete(targets):  # the batch's own, read on the host
            capacities = tail_capacities(targets, self.cutoffs)
        elif self.tail_shares:  # traced (a train step): any batch, exact beyond them too
            capacities = expected_tail_capacities(hidden.shape[0], self.tail_shares)
        return -adaptive_softmax_loss(
            hidden,
            p["head_weights"],
            p["tail_projections"],
            p["tail_weights"],
            targets,
            self.cutoffs,
            head_biases=p["head_biases"],
            tail_capacities=capacities,
        )

    def log_probs(self, hidden: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1], embedding)
        return adaptive_log_probs(
            hidden,
            p["head_weights"],
            p["tail_projections"],
            p["tail_weights"],
            self.cutoffs,
            head_biases=p["head_biases"],
        )


def _normalized(frequencies: np.ndarray) -> np.ndarray:
    frequencies = np.asarray(frequencies, np.float64) + 1.0  # as the heads' structures smooth them
    return frequencies / frequencies.sum()
