"""What ELECTRA reports, from corruptions and discriminator logits that are given: a position is
called replaced where its logit is above 0 (probability above ½), in training's accuracy as in
evaluation's detection metrics; evaluation corrupts at BERT's 15% with the generator sampling
at temperature 1, whatever the training options say. The generator, the discriminator and the
head are stand-ins, so nothing is compiled."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.contracts import SPECIAL_IDS
from seqjax.objectives import Electra, electra

ORIGINAL = jnp.array([[5, 6, 7, 8, 9]])
CORRUPTED = jnp.array([[5, 9, 7, 3, 4]])  # positions 1, 3 and 4 replaced; 4 is padding
MASK = jnp.array([[1.0, 1.0, 1.0, 1.0, 0.0]])
# Logit 0 at an original (probability ½: not called replaced), 0.3 at a replaced one (called
# replaced), -0.2 at an original, -1 at a replaced one (missed), 5 at the padding (not counted).
LOGITS = jnp.array([[0.0, 0.3, -0.2, -1.0, 5.0]])
LABELS = np.array([0.0, 1.0, 0.0, 1.0])  # of the four valid positions
CALLED = np.array([False, True, False, False])


@pytest.fixture
def corruptions(monkeypatch):
    """The corruption each call of the objective asked for: (rate, temperature, train)."""
    asked = []

    def replace_tokens(model, head, params, original, valid, key, *, ids, rate, temperature, train):
        asked.append((rate, temperature, train))
        return jnp.zeros((*original.shape, 4)), CORRUPTED != ORIGINAL, CORRUPTED

    monkeypatch.setattr(electra, "replace_tokens", replace_tokens)
    monkeypatch.setattr(electra, "discriminator_logits", lambda *args, **kwargs: LOGITS)
    monkeypatch.setattr(electra, "head_loss", lambda *args: (jnp.float32(0.0), {}))
    masked = {"nll": jnp.float32(2.0), "masked": jnp.float32(1.0), "positions": MASK.sum()}
    monkeypatch.setattr(electra, "masked_nll", lambda *args, **kwargs: masked)
    return asked


BATCH = {"inputs": ORIGINAL, "targets": ORIGINAL, "mask": MASK}
OPTIONS = Electra(rate=0.5, temperature=2.0, discriminator_weight=3.0)


def cross_entropy():
    logits = np.asarray(LOGITS[0, :4], np.float64)
    return -(LABELS * np.log(1 / (1 + np.exp(-logits))) + (1 - LABELS) * np.log(1 / (1 + np.exp(logits))))


def test_training_reports_the_accuracy_of_calling_positive_logits_replaced(corruptions):
    loss, metrics = OPTIONS(None, None, None, BATCH, jax.random.key(0), jnp.int32(0), ids=SPECIAL_IDS)
    assert corruptions == [(0.5, 2.0, True)]  # the options' rate and temperature
    assert float(metrics["discriminator_accuracy"]) == pytest.approx(np.mean(CALLED == (LABELS > 0)))  # 3 of 4
    assert float(metrics["replaced"]) == pytest.approx(0.5)
    assert float(metrics["discriminator_loss"]) == pytest.approx(cross_entropy().mean(), rel=1e-6)
    assert float(loss) == pytest.approx(3.0 * cross_entropy().mean(), rel=1e-6)


def test_evaluation_corrupts_at_bert_s_fifteen_percent_at_temperature_one(corruptions):
    OPTIONS.eval_sums(None, None, None, BATCH, jax.random.key(0), ids=SPECIAL_IDS)
    assert corruptions == [(0.15, 1.0, False)]


def test_evaluation_reports_the_detection_of_calling_positive_logits_replaced(corruptions):
    nll, masked, sums = OPTIONS.eval_sums(None, None, None, BATCH, jax.random.key(0), ids=SPECIAL_IDS)
    report = Electra.eval_report(float(nll), float(masked), jax.device_get(sums))
    assert report["discriminator_accuracy"] == pytest.approx(0.75)
    assert report["discriminator_precision"] == pytest.approx(1.0)  # the one called replaced was
    assert report["discriminator_recall"] == pytest.approx(0.5)  # one of the two replaced
    assert report["discriminator_base_rate"] == pytest.approx(0.5)
    assert report["discriminator_loss"] == pytest.approx(cross_entropy().mean(), rel=1e-5)
    # Pairs (replaced, original) ordered right: 0.3 > 0, 0.3 > -0.2; -1 below both: 2 of 4.
    assert report["discriminator_auc"] == pytest.approx(0.5)
