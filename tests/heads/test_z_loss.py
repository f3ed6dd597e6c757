"""PaLM's z-loss on the full softmax: value and gradients against a hand computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import Config, HeadConfig, override
from seqjax.heads import FullOptions, build_head, full_softmax_loss

N, D, V, Z = 5, 3, 7, 0.3
RNG = np.random.default_rng(0)
HIDDEN = RNG.standard_normal((N, D)).astype(np.float32)
WEIGHTS = 2.0 * RNG.standard_normal((V, D)).astype(np.float32)  # log Z far from 0
BIASES = RNG.standard_normal(V).astype(np.float32)
TARGETS = np.array([0, 6, 3, 3, 1], np.int32)
LOSS_GRADS = np.array([1.0, 0.5, 0.0, 2.0, 1.0])  # a weighting of the rows, as a masked mean gives


def by_hand():
    """Loss [N] and the gradients of sum(LOSS_GRADS · loss) in float64, written out."""
    h, w, b = HIDDEN.astype(np.float64), WEIGHTS.astype(np.float64), BIASES.astype(np.float64)
    logits = h @ w.T + b
    log_z = np.log(np.exp(logits).sum(axis=1))
    loss = log_z - logits[np.arange(N), TARGETS] + Z * log_z**2
    probs = np.exp(logits - log_z[:, None])
    one_hot = np.eye(V)[TARGETS]
    # d/dlogits of log Z - logit_t + Z log Z² = p (1 + 2 Z log Z) - onehot(t)
    d_logits = LOSS_GRADS[:, None] * (probs * (1 + 2 * Z * log_z)[:, None] - one_hot)
    return loss, (d_logits @ w, d_logits.T @ h, d_logits.sum(axis=0))


@pytest.mark.parametrize("chunk_size, residuals", [(None, None), (3, "float32"), (3, "recompute")])
def test_z_loss_value_and_gradients_equal_the_hand_computation(chunk_size, residuals):
    def weighted(hidden, weights, biases):
        losses = full_softmax_loss(
            hidden, weights, biases, TARGETS, chunk_size=chunk_size, z_loss=Z, block_residuals=residuals
        )
        return (losses * LOSS_GRADS).sum(), losses

    (_, losses), grads = jax.value_and_grad(weighted, argnums=(0, 1, 2), has_aux=True)(HIDDEN, WEIGHTS, BIASES)
    expected_loss, expected_grads = by_hand()
    np.testing.assert_allclose(losses, expected_loss, rtol=1e-5)
    for got, expected in zip(grads, expected_grads):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_zero_weight_is_the_plain_negative_log_likelihood():
    plain = full_softmax_loss(HIDDEN, WEIGHTS, BIASES, TARGETS)
    np.testing.assert_array_equal(full_softmax_loss(HIDDEN, WEIGHTS, BIASES, TARGETS, z_loss=0.0), plain)


def test_head_adds_the_z_loss_to_training_but_keeps_log_probs_normalized():
    head = build_head(HeadConfig(kind="full", groups=(FullOptions(z_loss=Z),)), V, np.ones(V, np.int64))
    plain = build_head(HeadConfig(kind="full"), V, np.ones(V, np.int64))
    mask = jnp.array([1.0, 1.0, 1.0, 0.0, 1.0])
    variables = {"params": {"weights": WEIGHTS, "biases": BIASES}}
    loss, aux = head.apply(variables, HIDDEN, TARGETS, None, mask, method="loss")
    expected, _ = by_hand()
    np.testing.assert_allclose(loss, (expected * mask).sum() / mask.sum(), rtol=1e-5)
    assert float(aux["tokens"]) == 4.0
    np.testing.assert_array_equal(
        head.apply(variables, HIDDEN, method="log_probs"), plain.apply(variables, HIDDEN, method="log_probs")
    )


@pytest.mark.parametrize("z_loss", [-0.1, float("nan"), float("inf")])
def test_negative_or_non_finite_weights_are_refused(z_loss):
    with pytest.raises(ValueError, match="z_loss must be a finite float >= 0"):
        full_softmax_loss(HIDDEN, WEIGHTS, BIASES, TARGETS, z_loss=z_loss)
    with pytest.raises(ValueError, match=r"head.full.z_loss must be a finite number in \[0.0, inf\)"):
        override(Config(), [f"head.full.z_loss={z_loss}"])


def test_z_loss_for_a_sampling_head_is_refused_as_ignored():
    with pytest.raises(ValueError, match=r"head.full.z_loss applies to head.kind=full, not 'sampled'"):
        override(Config(head=HeadConfig(kind="sampled")), ["head.full.z_loss=1e-4"])
