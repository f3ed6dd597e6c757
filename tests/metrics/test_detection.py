"""Detection metrics from sums over batches: counts against hand counts, the histogram AUC
against the exact rank (Mann–Whitney) AUC within the bound its shared bins allow."""

import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.metrics.detection import BINS, LOGIT_RANGE, detection_report, detection_sums, histogram_auc


def summed(batches):
    sums = [detection_sums(*map(jnp.asarray, batch)) for batch in batches]
    return {name: np.sum([np.asarray(s[name]) for s in sums], axis=0) for name in sums[0]}


def test_accuracy_precision_recall_and_base_rate_equal_hand_counts():
    logits = np.array([2.0, -1.0, 0.5, -3.0, 1.0, -0.5])
    labels = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    weights = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])  # the last entry is left out
    report = detection_report(summed([(logits[:3], labels[:3], weights[:3]), (logits[3:], labels[3:], weights[3:])]))
    # predicted positive: entries 0, 2, 4; of them positive: 0, 4; positives: 0, 1, 4; correct: 0, 3, 4
    assert report["precision"] == pytest.approx(2 / 3)
    assert report["recall"] == pytest.approx(2 / 3)
    assert report["accuracy"] == pytest.approx(3 / 5)
    assert report["base_rate"] == pytest.approx(3 / 5)
    assert report["base_rate_loss"] == pytest.approx(-(0.6 * np.log(0.6) + 0.4 * np.log(0.4)))
    p = 1 / (1 + np.exp(-logits[:5]))
    want = -(labels[:5] * np.log(p) + (1 - labels[:5]) * np.log(1 - p)).mean()
    assert report["loss"] == pytest.approx(want, rel=1e-5)


def exact_auc(scores, labels):
    ranks = np.argsort(np.argsort(scores)) + 1.0  # continuous scores: no ties
    positives, negatives = labels.sum(), (1 - labels).sum()
    return (ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives)


@pytest.mark.parametrize("separation", [0.0, 1.0, 3.0])
def test_histogram_auc_equals_the_rank_auc_within_half_the_shared_bin_pairs(separation):
    rng = np.random.default_rng(int(separation))
    labels = (rng.random(4000) < 0.15).astype(np.float64)
    logits = rng.normal(size=4000) * 2 + separation * labels - 2
    sums = summed([(logits[:2000], labels[:2000], np.ones(2000)), (logits[2000:], labels[2000:], np.ones(2000))])
    bins = np.clip(np.floor((logits + LOGIT_RANGE) * BINS / (2 * LOGIT_RANGE)), 0, BINS - 1)
    shared = sum(((bins == b) & (labels == 1)).sum() * ((bins == b) & (labels == 0)).sum() for b in np.unique(bins))
    bound = 0.5 * shared / (labels.sum() * (1 - labels).sum())
    got = histogram_auc(sums["positive_histogram"], sums["negative_histogram"])
    assert abs(got - exact_auc(logits, labels)) <= bound + 1e-9
    assert bound < 2e-3


def test_histogram_auc_is_one_half_when_every_pair_shares_a_bin():
    histogram = np.zeros(BINS)
    histogram[7] = 3.0
    assert histogram_auc(histogram, 2 * histogram) == pytest.approx(0.5)
