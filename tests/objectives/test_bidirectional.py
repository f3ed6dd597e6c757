"""ELMo's joint objective: what the backward LM reads, each direction's exact NLL against a
direct computation, and the loss as the mean of the two."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import HeadConfig, ModelConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import build_head
from seqjax.model_head import init_params, token_log_probs
from seqjax.models import build_model
from seqjax.objectives import BidirectionalLM
from seqjax.objectives.bidirectional import backward_hidden, backward_inputs, direction_nlls

V, B, T = 11, 3, 6
EOS = SPECIAL_IDS.eos


def test_backward_inputs_are_the_next_targets_then_the_boundary():
    targets = jnp.array([[5, 6, 7, 8], [9, 10, 0, 0]])
    mask = jnp.array([[1.0, 1, 1, 1], [1, 1, 0, 0]])
    np.testing.assert_array_equal(backward_inputs(targets, mask, EOS), [[6, 7, 8, EOS], [10, EOS, EOS, EOS]])


@pytest.fixture(scope="module")
def tiny_bilm():
    model = build_model(ModelConfig(kind="bilm", d_model=8, layers=1, dropout=0.0), V)
    head = build_head(HeadConfig(kind="full", tied=True), V, np.ones(V))
    tokens = jax.random.randint(jax.random.key(0), (B, T + 1), SPECIAL_IDS.count, V)
    mask = jnp.ones((B, T)).at[1, 4:].set(0.0)
    batch = {"inputs": tokens[:, :-1], "targets": tokens[:, 1:], "mask": mask}
    return model, head, jax.jit(lambda key: init_params(model, head, key, batch))(jax.random.key(1)), batch


@pytest.mark.slow
def test_backward_nll_scores_each_target_given_only_the_targets_after_it(tiny_bilm):
    model, head, params, batch = tiny_bilm
    targets, mask = np.asarray(batch["targets"]), np.asarray(batch["mask"])
    # One row per scored target: what follows it, then the boundary, padded at the end (padding
    # leaves the backward carry at its start, so position 0 is the state of that row alone).
    rows, scored = [], []
    for row in range(B):
        length = int(mask[row].sum())
        for t in range(length):
            rows.append([*targets[row, t + 1 : length], EOS] + [SPECIAL_IDS.pad] * (T - length + t))
            scored.append(targets[row, t])
    following = jnp.asarray(rows, jnp.int32)
    hidden = model.apply({"params": params["model"]}, following, mask=following != SPECIAL_IDS.pad, method="backward")
    log_probs = np.asarray(token_log_probs(model, head, params, hidden[:, :1]))[:, 0]
    want = -log_probs[np.arange(len(scored)), scored].sum()
    got = direction_nlls(model, head, params, batch, boundary_id=EOS)
    assert float(got["backward"]) == pytest.approx(want, rel=1e-5)
    assert float(got["tokens"]) == mask.sum()


def test_forward_nll_is_the_ordinary_lm_nll(tiny_bilm):
    model, head, params, batch = tiny_bilm
    hidden = model.apply({"params": params["model"]}, batch["inputs"])
    log_probs = np.asarray(token_log_probs(model, head, params, hidden))
    nll = -np.take_along_axis(log_probs, np.asarray(batch["targets"])[..., None], axis=-1)[..., 0]
    got = direction_nlls(model, head, params, batch, boundary_id=EOS)
    assert float(got["forward"]) == pytest.approx((nll * np.asarray(batch["mask"])).sum(), rel=1e-5)


def test_backward_states_of_the_batch_ignore_earlier_targets(tiny_bilm):
    model, head, params, batch = tiny_bilm
    t = 3
    changed = dict(batch, targets=batch["targets"].at[:, : t + 1].set(SPECIAL_IDS.count))
    key = jax.random.key(0)
    before = backward_hidden(model, params, batch, key, train=False, boundary_id=EOS)
    after = backward_hidden(model, params, changed, key, train=False, boundary_id=EOS)
    np.testing.assert_allclose(after[:, t:], before[:, t:], rtol=1e-6)


def test_loss_is_the_mean_of_the_two_directions_per_token(tiny_bilm):
    model, head, params, batch = tiny_bilm
    loss, metrics = jax.jit(
        lambda p: BidirectionalLM()(model, head, p, batch, jax.random.key(2), jnp.int32(0), ids=SPECIAL_IDS)
    )(params)
    nlls = jax.jit(lambda p: direction_nlls(model, head, p, batch, boundary_id=EOS))(params)
    tokens = float(nlls["tokens"])
    assert float(metrics["forward_loss"]) == pytest.approx(float(nlls["forward"]) / tokens, rel=1e-5)
    assert float(metrics["backward_loss"]) == pytest.approx(float(nlls["backward"]) / tokens, rel=1e-5)
    assert float(loss) == pytest.approx(0.5 * float(nlls["forward"] + nlls["backward"]) / tokens, rel=1e-5)
