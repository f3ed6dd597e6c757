"""Adaptive softmax (Grave et al. 2017), exact and cheaper than the full softmax under jit,
`head.kind=adaptive`: its loss, exact log-probs, Linen head and options.

The vocabulary (frequency-sorted) is cut at `cutoffs` = (c_1, ..., c_n): the head is a
softmax over the shortlist [0, c_1) plus one entry per tail cluster; tail cluster i covers
[c_i, c_{i+1}) (c_{n+1} = V) and scores its words from a projection of the hidden state to
D / div^i dimensions (i = 1..n), so p(w | h) = p(cluster(w) | h) · p(w | cluster(w), h).

Each tail cluster scores only its own rows, under static shapes: `seqjax.heads.adaptive_tails`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.checks import check_int, check_number, number
from seqjax.config import HEADS, HeadConfig, Options, option
from seqjax.heads import checks
from seqjax.heads.adaptive_tails import (
    blocked_tail_losses,
    expected_tail_capacities,
    gathered_tail_losses,
    require_capacities,
    tail_capacities,
)
from seqjax.heads.base import LinenHead, normal_init, smoothed_counts, smoothed_shares, word_table
from seqjax.heads.full import full_softmax_loss
from seqjax.placement import logical_param


def tail_dimensions(features: int, num_clusters: int, div_value: float) -> tuple[int, ...]:
    """Projected widths D // div^i of tail clusters i = 1..n, as PyTorch computes them.

    A width that comes out 0 is refused: PyTorch builds a 0-wide projection there, which
    gives that cluster's words a fixed uniform distribution no training can change.

    Raises:
      ValueError: D or n not a positive int, div_value < 1, or a tail width of 0 (naming the
        cluster, D and div_value).

    Example:
      >>> from seqjax.heads import tail_dimensions
      >>> tail_dimensions(512, 3, 4.0)
      (128, 32, 8)
      >>> tail_dimensions(8, 2, 4.0)
      Traceback (most recent call last):
      ...
      ValueError: tail cluster 2 would project to D // div_value^2 = 0 dimensions (D=8, div_value=4.0)...
    """
    features = check_int("features", features)
    num_clusters = check_int("num_clusters", num_clusters)
    check_number("div_value", div_value, 1.0)
    widths = tuple(int(features // div_value ** (i + 1)) for i in range(num_clusters))
    if 0 in widths:
        cluster = widths.index(0) + 1
        raise ValueError(
            f"tail cluster {cluster} would project to D // div_value^{cluster} = 0 dimensions "
            f"(D={features}, div_value={div_value}): use a wider D, a smaller div_value or fewer cutoffs"
        )
    return widths


def adaptive_softmax_loss(
    hidden: ArrayLike,
    head_weights: ArrayLike,
    tail_projections: Sequence[ArrayLike],
    tail_weights: Sequence[ArrayLike],
    targets: ArrayLike,
    cutoffs: Sequence[int],
    *,
    head_biases: ArrayLike | None = None,
    tail_capacities: Sequence[int] | None = None,
) -> Array:
    """Per-row −log p(target | h) of an adaptive softmax.

    Args:
      hidden: [N, D] float (computed in float32).
      head_weights: [c_1 + n, D] float: the shortlist words' vectors, then one per cluster.
      tail_projections: n arrays [D, d_i] float.
      tail_weights: n arrays [c_{i+1} − c_i, d_i] float (the last one [V − c_n, d_n]).
      targets: [N] int32 ids in [0, V).
      cutoffs: (c_1, ..., c_n), increasing, 0 < c_1 and c_n < V (host ints).
      head_biases: [c_1 + n] float added to the head's scores, or None (PyTorch's
        `head_bias=False`, its default).
      tail_capacities: n static ints >= 1, rows each tail gathers, or None: each tail walks
        its rows in blocks (see the module docstring). Concrete targets must fit them
        (`tail_capacities(targets, cutoffs)` on the host), checked here; traced targets of a
        tail beyond its capacity are scored by that tail's blocked path instead (a `lax.cond`),
        so a capacity chosen from expected shares (`expected_tail_capacities`) stays exact.

    Returns:
      [N] float32 losses.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import adaptive_log_probs, adaptive_softmax_loss, tail_dimensions
      >>> (width,) = tail_dimensions(8, 1, 2.0)  # one tail cluster [10, 30), projected to 4
      >>> rng = np.random.default_rng(0)
      >>> hidden, head = rng.normal(size=(3, 8)), rng.normal(size=(10 + 1, 8))  # shortlist + 1 cluster
      >>> projections, tails = [rng.normal(size=(8, width))], [rng.normal(size=(20, width))]
      >>> targets = np.array([0, 12, 29])
      >>> loss = adaptive_softmax_loss(hidden, head, projections, tails, targets, (10,))
      >>> exact = -adaptive_log_probs(hidden, head, projections, tails, (10,))[np.arange(3), targets]
      >>> loss.shape, loss.dtype, bool(jnp.allclose(loss, exact, rtol=1e-5))
      ((3,), dtype('float32'), True)
    """
    cutoffs, bounds = _validate(hidden, head_weights, tail_projections, tail_weights, cutoffs, head_biases)
    checks.require_hidden_and_targets(hidden, targets, bounds[-1])
    if tail_capacities is not None:
        require_capacities(tail_capacities, targets, cutoffs)
    hidden, targets = jnp.asarray(hidden, jnp.float32), jnp.asarray(targets)
    shortlist = cutoffs[0]
    cluster = jnp.searchsorted(jnp.asarray(cutoffs, jnp.int32), targets, side="right")  # 0: shortlist
    head_targets = jnp.where(cluster == 0, targets, shortlist + cluster - 1)
    losses = full_softmax_loss(hidden, head_weights, head_biases, head_targets)
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        in_tail = cluster == index + 1
        local_targets = targets - bounds[index]
        projection = jnp.asarray(projection, jnp.float32)
        weights = jnp.asarray(weights, jnp.float32)
        operands = (hidden, projection, weights, local_targets, in_tail)
        if tail_capacities is None:
            losses = losses + blocked_tail_losses(*operands)
        else:
            gathered = functools.partial(gathered_tail_losses, capacity=tail_capacities[index])
            if checks.is_concrete(targets):  # the capacity was checked above
                losses = losses + gathered(*operands)
            else:  # a batch beyond the capacity takes the blocked path, exact for any batch
                fits = in_tail.sum() <= tail_capacities[index]
                losses = losses + jax.lax.cond(fits, gathered, blocked_tail_losses, *operands)
    return losses


def adaptive_log_probs(
    hidden: ArrayLike,
    head_weights: ArrayLike,
    tail_projections: Sequence[ArrayLike],
    tail_weights: Sequence[ArrayLike],
    cutoffs: Sequence[int],
    *,
    head_biases: ArrayLike | None = None,
) -> Array:
    """Exact normalized log p(w | h) for every word: [N, V] float32.

    Arguments as in `adaptive_softmax_loss` (no targets).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from seqjax.heads import adaptive_log_probs
      >>> hidden, head = jnp.ones((2, 4)), jnp.zeros((3 + 1, 4))  # shortlist [0, 3), tail [3, 7)
      >>> projections, tails = [jnp.ones((4, 2))], [jnp.zeros((4, 2))]
      >>> log_probs = adaptive_log_probs(hidden, head, projections, tails, (3,), head_biases=jnp.zeros(4))
      >>> log_probs.shape, bool(jnp.allclose(jnp.exp(log_probs).sum(axis=1), 1.0))
      ((2, 7), True)
    """
    cutoffs, _ = _validate(hidden, head_weights, tail_projections, tail_weights, cutoffs, head_biases)
    hidden = jnp.asarray(hidden, jnp.float32)
    shortlist = cutoffs[0]
    head_scores = hidden @ jnp.asarray(head_weights, jnp.float32).T
    if head_biases is not None:
        head_scores = head_scores + jnp.asarray(head_biases, jnp.float32)
    head_log_probs = jax.nn.log_softmax(head_scores, axis=1)
    parts = [head_log_probs[:, :shortlist]]
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        projected = hidden @ jnp.asarray(projection, jnp.float32)
        tail_log_probs = jax.nn.log_softmax(projected @ jnp.asarray(weights, jnp.float32).T, axis=1)
        parts.append(head_log_probs[:, shortlist + index, None] + tail_log_probs)
    return jnp.concatenate(parts, axis=1)


def _validate(
    hidden: ArrayLike,
    head_weights: ArrayLike,
    tail_projections: Sequence[ArrayLike],
    tail_weights: Sequence[ArrayLike],
    cutoffs: Sequence[int],
    head_biases: ArrayLike | None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Checks shapes against the cutoffs; returns the cutoffs and the cluster bounds (c_1..c_n, V)."""
    checks.require_rank("hidden", hidden, 2)
    features = np.shape(hidden)[1]
    if len(tail_projections) != len(tail_weights):
        raise ValueError(
            f"tail_projections and tail_weights must have one entry per cluster, got "
            f"{len(tail_projections)} and {len(tail_weights)}"
        )
    num_clusters = len(tail_weights)
    values = tuple(cutoffs)
    if len(values) != num_clusters:
        raise ValueError(f"cutoffs must have one entry per tail cluster ({num_clusters}), got {values}")
    vocab_size = (values[-1] + np.shape(tail_weights[-1])[0]) if values else 0
    cutoffs = checks.require_cutoffs("cutoffs", values, vocab_size)
    bounds = cutoffs + (vocab_size,)
    checks.require_table("head_weights", head_weights, cutoffs[0] + num_clusters, features)
    checks.require_vector("head_biases", head_biases, cutoffs[0] + num_clusters)
    for index, (projection, weights) in enumerate(zip(tail_projections, tail_weights)):
        checks.require_rank(f"tail_projections[{index}]", projection, 2)
        width = np.shape(projection)[1]
        checks.require_table(f"tail_projections[{index}]", projection, features, width)
        checks.require_table(f"tail_weights[{index}]", weights, bounds[index + 1] - bounds[index], width)
    return cutoffs, bounds


@dataclasses.dataclass(frozen=True)
class AdaptiveOptions(Options):
    """The adaptive softmax's clusters."""

    cutoffs: tuple[int, ...] = option((), "increasing, < V: shortlist end, then cluster starts")
    div_value: float = option(4.0, "tail cluster i projects to D / div_value^i", check=number(1.0))
    head_bias: bool = option(False, "a bias on the head (shortlist + cluster) scores, as torch's head_bias")


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
        share = smoothed_shares(frequencies)
        total = features * (self.cutoffs[0] + len(self.cutoffs))
        for index, width in enumerate(tail_dimensions(features, len(self.cutoffs), self.div_value)):
            size = bounds[index + 1] - bounds[index]
            total += share[bounds[index] : bounds[index + 1]].sum() * width * (features + size)
        return float(total)

    @nn.compact
    def parameters(self, features: int, embedding: Array | None = None) -> dict:
        shortlist, clusters = self.cutoffs[0], len(self.cutoffs)
        cluster_weights = logical_param(
            self, "cluster_weights", normal_init(features), ("classes", "embed"), (clusters, features)
        )
        shortlist_weights = word_table(self, "shortlist_weights", shortlist, features, embedding, axis="words")
        head_biases = None
        if self.head_bias:
            head_biases = logical_param(self, "head_biases", nn.initializers.zeros, ("words",), (shortlist + clusters,))
        bounds = self.cutoffs + (self.vocab_size,)
        widths = tail_dimensions(features, clusters, self.div_value)
        projections, tails = [], []
        for index, width in enumerate(widths):
            projection = (features, width)  # [D, width]: embed, features
            init = normal_init(features)
            projections.append(logical_param(self, f"tail_projection_{index}", init, ("embed", "features"), projection))
            size = bounds[index + 1] - bounds[index]
            init = normal_init(width)
            tails.append(logical_param(self, f"tail_weights_{index}", init, ("words", "features"), (size, width)))
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


def _build(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> AdaptiveSoftmax:
    options = cfg.options_of(AdaptiveOptions)
    cutoffs = checks.require_cutoffs("head.adaptive.cutoffs", options.cutoffs, vocab_size)
    smoothed = smoothed_counts(counts)
    shares = np.add.reduceat(smoothed, np.array(cutoffs)) / smoothed.sum()  # one sum from each tail's start
    return AdaptiveSoftmax(
        vocab_size,
        cutoffs=cutoffs,
        div_value=options.div_value,
        tied=cfg.tied,
        head_bias=options.head_bias,
        tail_shares=tuple(float(share) for share in shares),
    )


HEADS.register("adaptive", _build, options=AdaptiveOptions, families=("tied",))
