"""NCE (`head.kind=nce`) and negative sampling (`head.kind=negative`): each sample a logistic
decision, data or noise; their losses, heads and options.

What the sampling heads share (scores of the target and the samples, the log expected counts
these losses correct by, `SamplingHead`) is in `seqjax.heads.sampled`.
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

from seqjax.config import HEADS, HeadConfig, Options, option
from seqjax.heads.base import word_parameters
from seqjax.heads.sampled import (
    SamplingHead,
    Table,
    accidental_hits,
    sampled_scores,
    sampling_options,
    validate_log_counts,
)
from seqjax.placement import logical_param


def nce_loss(
    hidden: ArrayLike,
    weights: Table,
    biases: Table | None,
    targets: ArrayLike,
    samples: ArrayLike,
    sample_log_expected_counts: ArrayLike,
    target_log_expected_counts: ArrayLike,
    *,
    log_normalizer: float | ArrayLike = 0.0,
    remove_accidental_hits: bool = False,
    gathered: bool = False,
) -> Array:
    """Noise-contrastive estimation (Mnih & Teh 2012) with K noise samples per row.

    With Δ(c) = s(c) − log Z − log(K q(c)), the posterior that c came from the data is σ(Δ(c)):
    loss = −log σ(Δ(target)) − Σ_k log(1 − σ(Δ(sample_k))).

    Args:
      hidden, weights, biases, targets, samples, sample_log_expected_counts,
        target_log_expected_counts: as in `sampled_softmax_loss` (log expected counts, see
        `seqjax.heads.sampled`).
      log_normalizer: log Z, a fixed float (0.0: the self-normalized model of Mnih & Teh) or a
        learned scalar array passed in by the caller.
      remove_accidental_hits: as TensorFlow's `nce_loss` (default False there too): a sample
        equal to the row's target contributes no noise term.
      gathered: as in `sampled_softmax_loss`.

    Returns:
      [N] float32 losses.

    Raises:
      ValueError: as `sampled_softmax_loss`.

    Example:
      >>> import jax, numpy as np
      >>> from seqjax.heads import nce_loss, samplers
      >>> rng = np.random.default_rng(0)
      >>> hidden, weights, targets = rng.normal(size=(4, 8)), rng.normal(size=(50, 8)), np.array([3, 7, 7, 42])
      >>> sampler = samplers.unigram(np.arange(50, 0, -1), power=0.75)
      >>> drawn = sampler.sample(jax.random.key(2), 10)
      >>> loss = nce_loss(hidden, weights, None, targets, drawn.ids, drawn.log_expected_counts,
      ...                 sampler.log_expected_count(targets, 10), remove_accidental_hits=True)
      >>> loss.shape, loss.dtype
      ((4,), dtype('float32'))
    """
    sample_scores, target_scores = sampled_scores(hidden, weights, biases, targets, samples, gathered)
    validate_log_counts(hidden, samples, sample_log_expected_counts, target_log_expected_counts)
    log_normalizer = jnp.asarray(log_normalizer, jnp.float32)
    target_logits = target_scores - log_normalizer - target_log_expected_counts
    sample_logits = sample_scores - log_normalizer - sample_log_expected_counts
    if remove_accidental_hits:
        sample_logits = jnp.where(accidental_hits(targets, samples), -jnp.inf, sample_logits)
    # -log σ(x) = softplus(-x), -log(1 - σ(x)) = softplus(x); 0 for x = -inf (dropped slots).
    return jax.nn.softplus(-target_logits) + _softplus_sum(sample_logits)


def negative_sampling_loss(
    hidden: ArrayLike,
    weights: Table,
    biases: Table | None,
    targets: ArrayLike,
    samples: ArrayLike,
    *,
    gathered: bool = False,
) -> Array:
    """word2vec's negative sampling (Mikolov et al. 2013): −log σ(s(t)) − Σ_k log σ(−s(sample_k)).

    Args:
      hidden: [N, D] float; weights: [V, D]; biases: [V] or None; targets: [N] int32;
      samples: [K] or [N, K] int32 negatives (word2vec draws them from unigram^0.75).
      gathered: as in `sampled_softmax_loss`.

    Returns:
      [N] float32 losses.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import negative_sampling_loss
      >>> hidden, weights = jnp.zeros((2, 4)), jnp.ones((10, 4))
      >>> loss = negative_sampling_loss(hidden, weights, None, jnp.array([1, 2]), jnp.array([5, 6, 7]))
      >>> print(np.asarray(loss).round(4))  # all scores 0: 4 · log 2
      [2.7726 2.7726]
    """
    sample_scores, target_scores = sampled_scores(hidden, weights, biases, targets, samples, gathered)
    return jax.nn.softplus(-target_scores) + _softplus_sum(sample_scores)


@jax.custom_vjp
def _softplus_sum(scores: Array) -> Array:
    """[N, K] -> [N]: Σ_k softplus(scores), 0 for a score of −inf; its gradient is σ(scores).

    Written out because `jax.nn.softplus`'s derivative, exp(x − softplus(x)) behind guards for
    infinities, took a second exponential and two more passes over the [N, K] scores: NCE with
    row gradients at V = 100k, N = 2048, K = 1024 took 1.17x its three products alone with it,
    1.06x with this (paired medians of 41 calls, 2-core Intel Xeon).
    """
    return _softplus_sum_fwd(scores)[0]


def _softplus_sum_fwd(scores: Array) -> tuple[Array, Array]:
    return (jnp.maximum(scores, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(scores)))).sum(axis=1), scores


def _softplus_sum_bwd(scores: Array, sum_grads: Array) -> tuple[Array]:
    return (jax.nn.sigmoid(scores) * sum_grads[:, None],)


_softplus_sum.defvjp(_softplus_sum_fwd, _softplus_sum_bwd)


@dataclasses.dataclass(frozen=True)
class NCEOptions(Options):
    """NCE's normalizer, fixed or learned."""

    log_normalizer: float = option(0.0, "log Z (the initial value when learned)")
    learn_normalizer: bool = option(False, "learn log Z instead of fixing it")


class NCE(SamplingHead):
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
        params = word_parameters(self, features, embedding, self.initial_bias(), self.learn_bias)
        if self.learn_normalizer:
            init = nn.initializers.constant(self.log_normalizer)
            params["log_normalizer"] = logical_param(self, "log_normalizer", init, (), ())
        else:
            params["log_normalizer"] = jnp.float32(self.log_normalizer)
        return params

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        params, arguments = self.loss_arguments(hidden, targets, key, embedding)
        return nce_loss(*arguments, log_normalizer=params["log_normalizer"])


class NegativeSampling(SamplingHead):
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


def _build_nce(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> NCE:
    shared = sampling_options(cfg, vocab_size, counts)
    options = cfg.options_of(NCEOptions)
    return NCE(
        vocab_size,
        unique=cfg.unique,
        log_normalizer=options.log_normalizer,
        learn_normalizer=options.learn_normalizer,
        **shared,
    )


def _build_negative(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> NegativeSampling:
    return NegativeSampling(vocab_size, **sampling_options(cfg, vocab_size, counts))


HEADS.register("nce", _build_nce, options=NCEOptions, families=("tied", "word_bias", "sampling"))
HEADS.register("negative", _build_negative, families=("tied", "word_bias", "sampling"))
