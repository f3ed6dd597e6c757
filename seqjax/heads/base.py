"""The Linen heads' shared parts: `LinenHead`, `WordScores`, `masked_mean`, the word tables.

Each head kind's module (`full_head`, `sampled`, `nce`, `classes`, `tree`, `adaptive`) holds
its Linen head, which owns its output parameters and offers `loss` (training) and `log_probs`
under the head contract (`seqjax.contracts.Head`):

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

Every parameter names its logical axes where it is created (`nn.with_logical_partitioning`): a
word table [V, D] is (vocab, embed), the biases [V] (vocab); the rows of a head's own structure
are `classes`, `nodes` or `words` (the adaptive head's shortlist and tails), which only FSDP
splits. `init` returns them boxed; the run's strategy maps them onto the mesh
(`seqjax.training.core.layout`).

Tying (`tied=True`) replaces the head's [V, D] word vectors by the caller's `embedding`:
the word table of the full, sampled, NCE and negative-sampling heads, the word level of the
class-based head, the shortlist rows of the adaptive head. Tree nodes are not words, so the
tree head cannot be tied (`build_head` refuses it).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.heads import full
from seqjax.placement import logical_param


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


def normal_init(features: int) -> jax.nn.initializers.Initializer:
    """N(0, 1 / D): scores h·w stay O(1) at initialization."""
    return nn.initializers.normal(stddev=features**-0.5)


def word_table(
    module: nn.Module, name: str, rows: int, features: int, embedding: Array | None, axis: str = "vocab"
) -> Array:
    """The module's own [rows, D] table (logical axes: `axis`, embed), or the first `rows` rows of
    a tied embedding."""
    if not module.tied:
        return logical_param(module, name, normal_init(features), (axis, "embed"), (rows, features))
    if embedding is None:
        raise ValueError(f"{type(module).__name__} is tied: pass the input embedding [V, D], got None")
    if embedding.ndim != 2 or embedding.shape != (module.vocab_size, features):
        raise ValueError(f"embedding must have shape [V={module.vocab_size}, D={features}], got {embedding.shape}")
    return jnp.asarray(embedding[:rows], jnp.float32)


def word_parameters(
    module: nn.Module, features: int, embedding: Array | None, initial_bias: float = 0.0, learn_bias: bool = True
) -> dict[str, Array]:
    """[V, D] word vectors (own or tied) and [V] biases starting at `initial_bias`, which get no
    gradient unless `learn_bias`; call from a compact method."""
    weights = word_table(module, "weights", module.vocab_size, features, embedding)  # drawn first, as ever
    init = nn.initializers.constant(initial_bias)
    biases = logical_param(module, "biases", init, ("vocab",), (module.vocab_size,))
    return {"weights": weights, "biases": biases if learn_bias else jax.lax.stop_gradient(biases)}


def smoothed_counts(counts: ArrayLike) -> np.ndarray:
    """[V] float64 counts + 1: the mass the heads' host structures (proposals, trees, classes,
    cluster shares) give each word, positive for a word never seen."""
    return np.asarray(counts).astype(np.float64) + 1.0


def smoothed_shares(frequencies: ArrayLike) -> np.ndarray:
    """[V] float64 shares of `smoothed_counts(frequencies)`: a head's expected target mix."""
    frequencies = smoothed_counts(frequencies)
    result: np.ndarray = frequencies / frequencies.sum()
    return result


class LinenHead(nn.Module):
    """The base of the Linen heads: the contract's `loss`, the masked mean of `row_losses`,
    which are the exact NLL −`target_log_probs` unless a head trains on another loss (or
    `fused_mean_loss`, that mean made another way)."""

    def loss(
        self,
        hidden: Array,
        targets: Array,
        key: Array | None = None,
        mask: Array | None = None,
        embedding: Array | None = None,
    ) -> tuple[Array, dict[str, Array]]:
        fused = self.fused_mean_loss(hidden, targets, mask, embedding)
        return masked_mean(self.row_losses(hidden, targets, key, embedding), mask) if fused is None else fused

    def fused_mean_loss(
        self, hidden: Array, targets: Array, mask: Array | None, embedding: Array | None
    ) -> tuple[Array, dict[str, Array]] | None:
        """The masked mean training loss and its aux made without per-row losses, where a head
        has a cheaper way to it for these shapes; None (here): the masked mean of `row_losses`."""
        return None

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
        return word_parameters(self, features, embedding, self.initial_bias(), self.learn_bias)

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
