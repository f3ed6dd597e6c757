"""Sampling losses: sampled softmax (importance sampling), NCE and negative sampling.

Each scores the true class and K sampled classes only, gathering K + 1 rows of the
[V, D] output table instead of multiplying by all V. Samples come from
`seqjax.heads.samplers` (or anywhere), shared by the batch ([K]) or drawn per row ([N, K];
this gathers [N, K, D] and suits small K). The exact evaluation of the sampled-softmax and NCE
models is the full softmax over the same scores (`full_softmax_loss`, or log_softmax of
`hidden @ weights.T + biases`); negative sampling's scores are a shifted PMI, log p − log(K q),
so its model is log_softmax(scores + log q) (`seqjax.heads.NegativeSampling.log_probs`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.heads import checks


def sampled_softmax_loss(
    hidden, weights, biases, targets, samples, sample_log_q, target_log_q, *, remove_accidental_hits=True
):
    """Importance-sampled softmax cross-entropy over the true class and K samples.

    Every score is corrected by its log expected count, s'(c) = s(c) − log(K q(c)), and the
    loss is the cross-entropy of the true class in a softmax over the K + 1 corrected scores
    (Jean et al. 2015; TensorFlow's `sampled_softmax_loss`).

    Args:
      hidden: [N, D] float (computed in float32).
      weights: [V, D] float; biases: [V] float or None.
      targets: [N] int32 ids in [0, V).
      samples: [K] int32 (shared by all rows) or [N, K] int32 (per row).
      sample_log_q: log expected counts of `samples`, same shape, float32 (+inf drops a slot).
      target_log_q: [N] float32 log expected counts of the targets.
      remove_accidental_hits: give a sample equal to the row's target the score −inf, so the
        true class is not also counted as a negative.

    Returns:
      [N] float32 losses.
    """
    _validate(hidden, weights, biases, targets, samples, sample_log_q, target_log_q)
    sample_scores, target_scores = _scores(hidden, weights, biases, targets, samples)
    targets, samples = jnp.asarray(targets), jnp.asarray(samples)
    sample_scores = sample_scores - sample_log_q
    target_scores = target_scores - target_log_q
    if remove_accidental_hits:
        hits = jnp.atleast_2d(samples) == targets[:, None]
        sample_scores = jnp.where(hits, -jnp.inf, sample_scores)
    # The finite target column keeps the normalizer finite even if every sample is dropped.
    all_scores = jnp.concatenate([target_scores[:, None], sample_scores], axis=1)
    return jax.nn.logsumexp(all_scores, axis=1) - target_scores


def nce_loss(hidden, weights, biases, targets, samples, sample_log_q, target_log_q, *, log_normalizer=0.0):
    """Noise-contrastive estimation (Mnih & Teh 2012) with K noise samples per row.

    With Δ(c) = s(c) − log Z − log(K q(c)), the posterior that c came from the data is σ(Δ(c)):
    loss = −log σ(Δ(target)) − Σ_k log(1 − σ(Δ(sample_k))).

    Args:
      hidden, weights, biases, targets, samples, sample_log_q, target_log_q: as in
        `sampled_softmax_loss` (log expected counts, i.e. log K·q).
      log_normalizer: log Z, a fixed float (0.0: the self-normalized model of Mnih & Teh) or a
        learned scalar array passed in by the caller.

    Returns:
      [N] float32 losses.
    """
    _validate(hidden, weights, biases, targets, samples, sample_log_q, target_log_q)
    sample_scores, target_scores = _scores(hidden, weights, biases, targets, samples)
    log_normalizer = jnp.asarray(log_normalizer, jnp.float32)
    target_logits = target_scores - log_normalizer - target_log_q
    sample_logits = sample_scores - log_normalizer - sample_log_q
    # -log σ(x) = softplus(-x), -log(1 - σ(x)) = softplus(x); finite for x = -inf (dropped slots).
    return jax.nn.softplus(-target_logits) + jax.nn.softplus(sample_logits).sum(axis=1)


def negative_sampling_loss(hidden, weights, biases, targets, samples):
    """word2vec's negative sampling (Mikolov et al. 2013): −log σ(s(t)) − Σ_k log σ(−s(sample_k)).

    Args:
      hidden: [N, D] float; weights: [V, D]; biases: [V] or None; targets: [N] int32;
      samples: [K] or [N, K] int32 negatives (word2vec draws them from unigram^0.75).

    Returns:
      [N] float32 losses.
    """
    _validate(hidden, weights, biases, targets, samples, None, None)
    sample_scores, target_scores = _scores(hidden, weights, biases, targets, samples)
    return jax.nn.softplus(-target_scores) + jax.nn.softplus(sample_scores).sum(axis=1)


def _scores(hidden, weights, biases, targets, samples):
    """Raw scores h·w + b of the samples ([N, K]) and of the targets ([N]), in float32."""
    hidden = jnp.asarray(hidden, jnp.float32)
    weights = jnp.asarray(weights, jnp.float32)
    targets, samples = jnp.asarray(targets), jnp.asarray(samples)
    rows = targets.shape[0]
    # One gather of the targets' and the samples' rows, so that the backward pass scatters
    # into a single dense [V, D] gradient.
    ids = jnp.concatenate([targets, samples.reshape(-1)])
    gathered = weights[ids]
    if biases is not None:
        gathered_biases = jnp.asarray(biases, jnp.float32)[ids]
    target_scores = jnp.einsum("nd,nd->n", hidden, gathered[:rows])
    sample_rows = gathered[rows:].reshape(samples.shape + (weights.shape[1],))
    if samples.ndim == 1:
        sample_scores = hidden @ sample_rows.T
    else:
        sample_scores = jnp.einsum("nd,nkd->nk", hidden, sample_rows)
    if biases is not None:
        target_scores = target_scores + gathered_biases[:rows]
        sample_scores = sample_scores + gathered_biases[rows:].reshape(samples.shape)
    return sample_scores, target_scores


def _validate(hidden, weights, biases, targets, samples, sample_log_q, target_log_q):
    vocab_size, _ = checks.require_output_layer(hidden, weights, biases, targets)
    rows = np.shape(hidden)[0]
    if np.ndim(samples) not in (1, 2) or (np.ndim(samples) == 2 and np.shape(samples)[0] != rows):
        raise ValueError(f"samples must have shape [K] or [N={rows}, K], got {np.shape(samples)}")
    if np.shape(samples)[-1] == 0:
        raise ValueError(f"samples must hold K > 0 ids, got shape {np.shape(samples)}")
    checks.require_ids("samples", samples, vocab_size)
    if sample_log_q is not None and np.shape(sample_log_q) != np.shape(samples):
        raise ValueError(
            f"sample_log_q must have the shape of samples {np.shape(samples)}, got {np.shape(sample_log_q)}"
        )
    if target_log_q is not None and np.shape(target_log_q) != (rows,):
        raise ValueError(f"target_log_q must have shape [N={rows}], got {np.shape(target_log_q)}")
