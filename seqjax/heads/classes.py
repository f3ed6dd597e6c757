"""Class-based two-level softmax (Goodman 2001; Mikolov et al. 2011).

Words are split into C classes; p(w | h) = p(c(w) | h) · p(w | c(w), h), each factor a
softmax: over the C classes, then over the words of the word's class. `frequency_classes`
makes classes of equal frequency mass from contiguous id ranges ("frequency binning"): on a
frequency-sorted vocabulary the frequent words get small classes and the rare words large ones.

Under static shapes every row scores the M words of the largest class ([N, M, D] gathered
word vectors), so the loss costs O(N·(C + M)·D) against the full softmax's O(N·V·D).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.heads import checks


@dataclasses.dataclass(frozen=True, eq=False)
class Classes:
    """Contiguous classes over ids [0, V) (numpy, host side).

    starts: [C] int32 first id of each class; sizes: [C] int32 words per class;
    class_of: [V] int32 class of each word.
    """

    starts: np.ndarray
    sizes: np.ndarray
    class_of: np.ndarray

    @property
    def num_classes(self) -> int:
        return self.starts.size

    @property
    def vocab_size(self) -> int:
        return self.class_of.size

    @property
    def max_size(self) -> int:
        return int(self.sizes.max())


def frequency_classes(counts, num_classes: int) -> Classes:
    """Splits ids [0, V) into `num_classes` contiguous, non-empty classes of ~equal count mass.

    Class c starts at the first id whose preceding mass reaches c / C of the total (a word
    heavier than 1 / C gets a class of its own, and the following boundaries move on).

    Args:
      counts: [V] positive counts (smooth zeros first, e.g. counts + 1).
      num_classes: 1 <= C <= V.
    """
    values = checks.require_counts("counts", counts)
    num_classes = checks.require_positive_int("num_classes", num_classes)
    vocab_size = values.size
    if num_classes > vocab_size:
        raise ValueError(f"num_classes must be <= vocab_size={vocab_size}, got {num_classes}")
    mass_before = np.concatenate([[0.0], np.cumsum(values)[:-1]]) / values.sum()
    starts = [0]
    for index in range(1, num_classes):
        wanted = int(np.searchsorted(mass_before, index / num_classes, side="left"))
        # At least one word for this class and for each class after it.
        starts.append(min(max(wanted, starts[-1] + 1), vocab_size - (num_classes - index)))
    starts = np.array(starts, np.int32)
    sizes = np.diff(np.append(starts, vocab_size)).astype(np.int32)
    class_of = np.repeat(np.arange(num_classes, dtype=np.int32), sizes)
    return Classes(starts, sizes, class_of)


def class_softmax_loss(
    hidden, class_weights, class_biases, word_weights, word_biases, targets, classes: Classes
):
    """Per-row −log p(c(t) | h) − log p(t | c(t), h).

    Args:
      hidden: [N, D] float (computed in float32).
      class_weights: [C, D] float; class_biases: [C] float or None.
      word_weights: [V, D] float; word_biases: [V] float or None.
      targets: [N] int32 ids in [0, V).
      classes: a `Classes` over V words.

    Returns:
      [N] float32 losses.
    """
    _validate(hidden, class_weights, class_biases, word_weights, word_biases, classes)
    checks.require_hidden_and_targets(hidden, targets, classes.vocab_size)
    hidden, targets = jnp.asarray(hidden, jnp.float32), jnp.asarray(targets)
    class_of = jnp.asarray(classes.class_of)[targets]
    class_log_probs = jax.nn.log_softmax(_affine(hidden, class_weights, class_biases), axis=1)
    target_class_log_probs = jnp.take_along_axis(class_log_probs, class_of[:, None], axis=1)[:, 0]

    offsets = jnp.arange(classes.max_size, dtype=jnp.int32)
    starts = jnp.asarray(classes.starts)[class_of]
    in_class = offsets[None, :] < jnp.asarray(classes.sizes)[class_of][:, None]  # [N, M]
    word_ids = jnp.minimum(starts[:, None] + offsets[None, :], classes.vocab_size - 1)
    word_scores = jnp.einsum("nd,nmd->nm", hidden, jnp.asarray(word_weights, jnp.float32)[word_ids])
    if word_biases is not None:
        word_scores = word_scores + jnp.asarray(word_biases, jnp.float32)[word_ids]
    word_scores = jnp.where(in_class, word_scores, -jnp.inf)
    target_scores = jnp.take_along_axis(word_scores, (targets - starts)[:, None], axis=1)[:, 0]
    word_log_probs = target_scores - jax.nn.logsumexp(word_scores, axis=1)
    return -(target_class_log_probs + word_log_probs)


def class_log_probs(hidden, class_weights, class_biases, word_weights, word_biases, classes: Classes):
    """Exact normalized log p(w | h) for every word: [N, V] float32 (one [N, D] x [D, V] matmul)."""
    _validate(hidden, class_weights, class_biases, word_weights, word_biases, classes)
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


def _affine(hidden, weights, biases):
    scores = hidden @ jnp.asarray(weights, jnp.float32).T
    return scores if biases is None else scores + jnp.asarray(biases, jnp.float32)


def _validate(hidden, class_weights, class_biases, word_weights, word_biases, classes: Classes) -> None:
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
