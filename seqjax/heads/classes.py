"""Class-based two-level softmax (Goodman 2001; Mikolov et al. 2011), `head.kind=class`: its loss,
exact log-probs, Linen head and options.

Words are split into C classes; p(w | h) = p(c(w) | h) · p(w | c(w), h), each factor a
softmax: over the C classes, then over the words of the word's class. `frequency_classes`
makes classes of equal frequency mass from contiguous id ranges ("frequency binning"): on a
frequency-sorted vocabulary the frequent words get small classes and the rare words large ones.

The within-class term is scored class by class over the rows sorted by class
(`class_blocks.within_class_losses`): each class's words are one contiguous slice of the
table, read once for all of the class's rows, so the loss reads the [V, D] table about once
instead of gathering [N, |class|, D] words per row. Slices have one width per tier of classes
of similar size (FIRST_TIER words, then each tier up to TIER_GROWTH times wider), so a class
is never scored through a window more than TIER_GROWTH times its size.
"""

from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.checks import check_int, integer
from seqjax.config import HEADS, HeadConfig, Options, option
from seqjax.heads import checks
from seqjax.heads.base import LinenHead, normal_init, smoothed_counts, smoothed_shares, word_parameters
from seqjax.heads.class_blocks import tiers_of, within_class_losses
from seqjax.placement import logical_param

FIRST_TIER = 4  # classes of up to this many words share the first tier
TIER_GROWTH = 1.5  # each further tier holds classes up to this many times wider

Layer = tuple[ArrayLike, ArrayLike | None]  # a [rows, D] table and its [rows] biases or None


@dataclasses.dataclass(frozen=True, eq=False)
class Classes:
    """Contiguous classes over ids [0, V) (numpy, host side).

    starts: [C] int32 first id of each class; sizes: [C] int32 words per class;
    class_of: [V] int32 class of each word; shares: [C] float64 each class's share of the counts
    the classes were made from (what sizes the loss's steps, `class_blocks.slot_capacities`), or
    None.
    """

    starts: np.ndarray
    sizes: np.ndarray
    class_of: np.ndarray
    shares: np.ndarray | None = None

    @property
    def num_classes(self) -> int:
        return self.starts.size

    @property
    def vocab_size(self) -> int:
        return self.class_of.size

    @property
    def max_size(self) -> int:
        return int(self.sizes.max())


def frequency_classes(counts: ArrayLike, num_classes: int) -> Classes:
    """Splits ids [0, V) into `num_classes` contiguous, non-empty classes of ~equal count mass.

    Class c starts at the first id whose preceding mass reaches c / C of the total (a word
    heavier than 1 / C gets a class of its own, and the following boundaries move on).

    Args:
      counts: [V] positive counts, host side (smooth zeros first, e.g. counts + 1).
      num_classes: 1 <= C <= V.

    Returns:
      `Classes` of numpy int32 arrays: starts [C], sizes [C], class_of [V]; and shares [C]
      float64, each class's share of the counts.

    Example:
      >>> from seqjax.heads import frequency_classes
      >>> classes = frequency_classes([50, 20, 10, 10, 5, 5], 3)
      >>> classes.starts.tolist(), classes.sizes.tolist()  # masses 50, 20, 30
      ([0, 1, 2], [1, 1, 4])
    """
    values = checks.require_counts("counts", counts)
    num_classes = check_int("num_classes", num_classes)
    vocab_size = values.size
    if num_classes > vocab_size:
        raise ValueError(f"num_classes must be <= vocab_size={vocab_size}, got {num_classes}")
    mass_before = np.concatenate([[0.0], np.cumsum(values)[:-1]]) / values.sum()
    first_ids = [0]
    for index in range(1, num_classes):
        wanted = int(np.searchsorted(mass_before, index / num_classes, side="left"))
        # At least one word for this class and for each class after it.
        first_ids.append(min(max(wanted, first_ids[-1] + 1), vocab_size - (num_classes - index)))
    starts = np.array(first_ids, np.int32)
    sizes = np.diff(np.append(starts, vocab_size)).astype(np.int32)
    class_of = np.repeat(np.arange(num_classes, dtype=np.int32), sizes)
    shares = np.add.reduceat(values.astype(np.float64), starts) / values.sum()
    return Classes(starts, sizes, class_of, shares)


def class_softmax_loss(
    hidden: ArrayLike,
    class_weights: ArrayLike,
    class_biases: ArrayLike | None,
    word_weights: ArrayLike,
    word_biases: ArrayLike | None,
    targets: ArrayLike,
    classes: Classes,
) -> Array:
    """Per-row −log p(c(t) | h) − log p(t | c(t), h).

    Args:
      hidden: [N, D] float (computed in float32).
      class_weights: [C, D] float; class_biases: [C] float or None.
      word_weights: [V, D] float; word_biases: [V] float or None.
      targets: [N] int32 ids in [0, V).
      classes: a `Classes` over V words.

    Returns:
      [N] float32 losses.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import class_log_probs, class_softmax_loss, frequency_classes
      >>> classes = frequency_classes(np.arange(20, 0, -1), 4)
      >>> rng = np.random.default_rng(0)
      >>> hidden, class_weights = rng.normal(size=(3, 8)), rng.normal(size=(4, 8))
      >>> word_weights = rng.normal(size=(20, 8))
      >>> targets = np.array([0, 5, 19])
      >>> loss = class_softmax_loss(hidden, class_weights, None, word_weights, None, targets, classes)
      >>> exact = -class_log_probs(hidden, class_weights, None, word_weights, None, classes)[np.arange(3), targets]
      >>> loss.shape, loss.dtype, bool(jnp.allclose(loss, exact, rtol=1e-5))
      ((3,), dtype('float32'), True)
    """
    _validate(hidden, (class_weights, class_biases), (word_weights, word_biases), classes)
    checks.require_hidden_and_targets(hidden, targets, classes.vocab_size)
    hidden, targets = jnp.asarray(hidden, jnp.float32), jnp.asarray(targets)
    class_of = jnp.asarray(classes.class_of)[targets]
    class_log_probs = jax.nn.log_softmax(_affine(hidden, class_weights, class_biases), axis=1)
    target_class_log_probs = jnp.take_along_axis(class_log_probs, class_of[:, None], axis=1)[:, 0]

    word_losses = within_class_losses(
        hidden,
        jnp.asarray(word_weights, jnp.float32),
        None if word_biases is None else jnp.asarray(word_biases, jnp.float32),
        targets,
        class_of,
        tiers_of(classes.starts, classes.sizes, _tier_of_class(classes), classes.shares),
    )
    return word_losses - target_class_log_probs


def class_log_probs(
    hidden: ArrayLike,
    class_weights: ArrayLike,
    class_biases: ArrayLike | None,
    word_weights: ArrayLike,
    word_biases: ArrayLike | None,
    classes: Classes,
) -> Array:
    """Exact normalized log p(w | h) for every word: [N, V] float32 (one [N, D] x [D, V] matmul).

    Arguments as in `class_softmax_loss` (no targets).

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import class_log_probs, frequency_classes
      >>> classes = frequency_classes([5, 1, 1, 1], 2)  # {0}, {1, 2, 3}
      >>> log_probs = class_log_probs(jnp.zeros((1, 2)), jnp.zeros((2, 2)), None, jnp.zeros((4, 2)), None, classes)
      >>> print(np.asarray(jnp.exp(log_probs)).round(4))  # 1/2, then 1/2 · 1/3 each
      [[0.5    0.1667 0.1667 0.1667]]
    """
    _validate(hidden, (class_weights, class_biases), (word_weights, word_biases), classes)
    hidden = jnp.asarray(hidden, jnp.float32)
    class_of = jnp.asarray(classes.class_of)
    class_log_probs_ = jax.nn.log_softmax(_affine(hidden, class_weights, class_biases), axis=1)
    word_scores = _affine(hidden, word_weights, word_biases)
    by_word = word_scores.T  # [V, N]: segment reductions run over the leading axis
    maxima = jax.ops.segment_max(by_word, class_of, classes.num_classes, indices_are_sorted=True)
    sums = jax.ops.segment_sum(
        jnp.exp(by_word - maxima[class_of]), class_of, classes.num_classes, indices_are_sorted=True
    )
    log_normalizers = (maxima + jnp.log(sums))[class_of].T  # [N, V]
    return class_log_probs_[:, class_of] + word_scores - log_normalizers


def _tier_of_class(classes: Classes) -> np.ndarray:
    """[C] int: the size tier of each class, tier t holding sizes up to FIRST_TIER · TIER_GROWTH^t."""
    ratio = np.maximum(classes.sizes / FIRST_TIER, 1.0)
    tiers = np.ceil(np.log(ratio) / np.log(TIER_GROWTH) - 1e-9).astype(np.int32)
    return np.unique(tiers, return_inverse=True)[1].astype(np.int32)  # drop empty tiers


def _affine(hidden: Array, weights: ArrayLike, biases: ArrayLike | None) -> Array:
    scores = hidden @ jnp.asarray(weights, jnp.float32).T
    return scores if biases is None else scores + jnp.asarray(biases, jnp.float32)


def _validate(hidden: ArrayLike, class_layer: Layer, word_layer: Layer, classes: Classes) -> None:
    (class_weights, class_biases), (word_weights, word_biases) = class_layer, word_layer
    if not isinstance(classes, Classes):
        raise ValueError(f"classes must be a Classes from frequency_classes, got {type(classes).__name__}")
    checks.require_rank("word_weights", word_weights, 2)
    features = np.shape(word_weights)[1]
    checks.require_rank("hidden", hidden, 2)
    checks.require_table("hidden", hidden, None, features)
    checks.require_table("class_weights", class_weights, classes.num_classes, features)
    checks.require_table("word_weights", word_weights, classes.vocab_size, features)
    checks.require_vector("class_biases", class_biases, classes.num_classes)
    checks.require_vector("word_biases", word_biases, classes.vocab_size)


@dataclasses.dataclass(frozen=True)
class ClassOptions(Options):
    """The class-factored softmax's number of frequency classes."""

    num_classes: int = option(0, "number of classes, 0 for ceil(sqrt(V))", check=integer(0))


class ClassSoftmax(LinenHead):
    """Two-level class-based softmax over `classes`; tying applies to the word level."""

    vocab_size: int
    classes: Classes
    tied: bool = False

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """The class scores and the words of the target's class, expected over `frequencies` [V]."""
        sizes = np.asarray(self.classes.sizes)[np.asarray(self.classes.class_of)]
        return float(features * (len(self.classes.sizes) + np.dot(smoothed_shares(frequencies), sizes)))

    @nn.compact
    def parameters(self, features: int, embedding: Array | None = None) -> dict:
        shape = (self.classes.num_classes, features)
        return {
            "class_weights": logical_param(self, "class_weights", normal_init(features), ("classes", "embed"), shape),
            "class_biases": logical_param(self, "class_biases", nn.initializers.zeros, ("classes",), shape[:1]),
            **word_parameters(self, features, embedding),
        }

    def log_probs(self, hidden: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1], embedding)
        return class_log_probs(hidden, p["class_weights"], p["class_biases"], p["weights"], p["biases"], self.classes)

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1], embedding)
        return -class_softmax_loss(
            hidden, p["class_weights"], p["class_biases"], p["weights"], p["biases"], targets, self.classes
        )


def _build(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> ClassSoftmax:
    num_classes = cfg.options_of(ClassOptions).num_classes or math.ceil(math.sqrt(vocab_size))
    if not 0 < num_classes <= vocab_size:
        raise ValueError(
            f"head.class.num_classes must be in [0, vocab_size={vocab_size}] (0: ceil(sqrt(V))), "
            f"got {cfg.options_of(ClassOptions).num_classes}"
        )
    return ClassSoftmax(vocab_size, classes=frequency_classes(smoothed_counts(counts), num_classes), tied=cfg.tied)


HEADS.register("class", _build, options=ClassOptions, families=("tied",))
