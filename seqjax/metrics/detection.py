"""How well a binary detector separates positives from negatives, from sums that add over batches.

Inside a jitted eval step, `detection_sums` turns one batch's logits and labels into counts and
two fixed-shape histograms of the logits (one for positives, one for negatives); the sums of
these over a split go to `detection_report` on the host, which gives accuracy, precision and
recall at logit 0, the mean cross-entropy, the base rate with the cross-entropy of always
answering it, and the AUC from the two histograms. The histograms' bins split [−LOGIT_RANGE,
LOGIT_RANGE] evenly (logits beyond fall in the end bins), so the AUC is exact but for the pairs
that share a bin, each counted as half a win: it is off by at most half their fraction.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

BINS = 2048
LOGIT_RANGE = 16.0


def detection_sums(logits: jax.Array, labels: jax.Array, weights: jax.Array) -> dict[str, jax.Array]:
    """Sums over the weighted entries of logits [...] float32 (log-odds of positive), labels
    [...] float32 (1 positive, 0 negative) and weights [...] float32 (0 leaves an entry out).

    Returns: "count", "positives", "predicted" (logit > 0), "true_positives", "correct",
    "cross_entropy": [] float32; "positive_histogram", "negative_histogram": [BINS] float32.
    """
    predicted = (logits > 0).astype(jnp.float32)
    scaled = (logits + LOGIT_RANGE) * (BINS / (2 * LOGIT_RANGE))
    index = jnp.clip(jnp.floor(scaled), 0, BINS - 1).astype(jnp.int32).reshape(-1)
    positive, negative = (weights * labels).reshape(-1), (weights * (1 - labels)).reshape(-1)
    return {
        "count": weights.sum(),
        "positives": positive.sum(),
        "predicted": (weights * predicted).sum(),
        "true_positives": (positive * predicted.reshape(-1)).sum(),
        "correct": (weights * (predicted == labels)).sum(),
        "cross_entropy": (weights * optax.sigmoid_binary_cross_entropy(logits, labels)).sum(),
        "positive_histogram": jnp.zeros(BINS, jnp.float32).at[index].add(positive),
        "negative_histogram": jnp.zeros(BINS, jnp.float32).at[index].add(negative),
    }


def histogram_auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive's logit > a negative's), a pair in one bin counting ½, from the weights
    [BINS] of each class per bin; nan without both classes."""
    positive, negative = np.asarray(positive, np.float64), np.asarray(negative, np.float64)
    below = np.cumsum(negative) - negative  # negatives in lower bins
    pairs = positive.sum() * negative.sum()
    return float((positive * (below + 0.5 * negative)).sum() / pairs) if pairs > 0 else float("nan")


def detection_report(sums: dict[str, np.ndarray]) -> dict[str, float]:
    """`detection_sums` summed over batches -> accuracy, precision, recall, auc, loss (mean
    cross-entropy, nats), base_rate (fraction of positives) and base_rate_loss (the mean
    cross-entropy of answering the base rate everywhere: its binary entropy)."""
    count = max(float(sums["count"]), 1.0)
    rate = float(sums["positives"]) / count
    entropy = -sum(p * np.log(p) for p in (rate, 1 - rate) if p > 0)
    return {
        "accuracy": float(sums["correct"]) / count,
        "precision": float(sums["true_positives"]) / max(float(sums["predicted"]), 1.0),
        "recall": float(sums["true_positives"]) / max(float(sums["positives"]), 1.0),
        "auc": histogram_auc(sums["positive_histogram"], sums["negative_histogram"]),
        "loss": float(sums["cross_entropy"]) / count,
        "base_rate": rate,
        "base_rate_loss": float(entropy),
    }
