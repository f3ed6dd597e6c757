"""ELMo's joint objective: the backward LM as the forward one's mirror image on a row (it reads
the real token after the row's last input), each direction's exact NLL against a direct
computation, and the loss as the mean of the two."""

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from objective_toys import initialized_on_random_tokens

from seqjax.config import HeadConfig, ModelConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.data import lm_eval_batches
from seqjax.heads import build_head
from seqjax.model_head import token_log_probs
from seqjax.models import build_model
from seqjax.objectives import BidirectionalLM
from seqjax.objectives.bidirectional import backward_batch, backward_hidden, direction_nlls

V, B, T = 11, 3, 6
EOS, PAD = SPECIAL_IDS.eos, SPECIAL_IDS.pad


@pytest.fixture(scope="module")
def tiny_bilm():
    model = build_model(ModelConfig(kind="bilm", d_model=8, layers=1, dropout=0.0), V)
    head = build_head(HeadConfig(kind="full", tied=True), V, np.ones(V))
    return initialized_on_random_tokens(model, head, V, jnp.ones((B, T)).at[1, 4:].set(0.0))


def test_backward_lm_has_read_only_the_rows_real_last_token_at_its_last_position(tiny_bilm):
    model, _, params, batch = tiny_bilm
    last = batch["targets"][:, -1:]  # w_T, the token after the last input w_{T-1}
    want = model.apply({"params": params["model"]}, last, method="backward")[:, 0]
    got = backward_hidden(model, params, batch, jax.random.key(0), train=False)[:, -1]
    np.testing.assert_allclose(got[::2], want[::2], rtol=1e-6)


def test_backward_lm_predicts_the_inputs_the_forward_lm_reads():
    batch = {"inputs": jnp.array([[4, 5, 6]]), "targets": jnp.array([[5, 6, 7]]), "mask": jnp.ones((1, 3))}
    mirrored = backward_batch(batch)
    np.testing.assert_array_equal(mirrored["targets"], [[4, 5, 6]])
    np.testing.assert_array_equal(mirrored["inputs"], [[5, 6, 7]])


def test_both_directions_score_the_same_tokens_of_a_split_ending_a_line():
    stream = np.array([4, 5, EOS, 6, 7, 8, EOS, 9, EOS])
    forward, backward = Counter(), Counter()
    for batch in lm_eval_batches(stream, batch_size=2, seq_len=2):
        scored = batch["mask"] > 0
        forward.update(batch["targets"][scored].tolist())
        backward.update(np.asarray(backward_batch(batch)["targets"])[scored].tolist())
    assert forward == backward == Counter(stream.tolist())


@pytest.mark.slow
def test_backward_nll_scores_each_input_given_only_the_targets_after_it(tiny_bilm):
    model, head, params, batch = tiny_bilm
    inputs, targets, mask = (np.asarray(batch[k]) for k in ("inputs", "targets", "mask"))
    # One row per scored input w_t: what follows it in the row (w_{t+1} … w_T), padded at the end
    # (padding leaves the backward carry at its start, so position 0 is the state of that row alone).
    rows, scored = [], []
    for row in range(B):
        length = int(mask[row].sum())
        for t in range(length):
            rows.append([*targets[row, t:length]] + [PAD] * (T - length + t))
            scored.append(inputs[row, t])
    following = jnp.asarray(rows, jnp.int32)
    hidden = model.apply({"params": params["model"]}, following, mask=following != PAD, method="backward")
    log_probs = np.asarray(token_log_probs(model, head, params, hidden[:, :1]))[:, 0]
    want = -log_probs[np.arange(len(scored)), scored].sum()
    got = direction_nlls(model, head, params, batch)
    assert float(got["backward"]) == pytest.approx(want, rel=1e-5)
    assert float(got["tokens"]) == mask.sum()


def test_forward_nll_is_the_ordinary_lm_nll(tiny_bilm):
    model, head, params, batch = tiny_bilm
    hidden = model.apply({"params": params["model"]}, batch["inputs"])
    log_probs = np.asarray(token_log_probs(model, head, params, hidden))
    nll = -np.take_along_axis(log_probs, np.asarray(batch["targets"])[..., None], axis=-1)[..., 0]
    got = direction_nlls(model, head, params, batch)
    assert float(got["forward"]) == pytest.approx((nll * np.asarray(batch["mask"])).sum(), rel=1e-5)


def test_backward_states_of_the_batch_ignore_earlier_tokens(tiny_bilm):
    model, _, params, batch = tiny_bilm
    t = 3
    changed = dict(batch, targets=batch["targets"].at[:, :t].set(SPECIAL_IDS.count))
    key = jax.random.key(0)
    before = backward_hidden(model, params, batch, key, train=False)
    after = backward_hidden(model, params, changed, key, train=False)
    np.testing.assert_allclose(after[:, t:], before[:, t:], rtol=1e-6)


def test_loss_is_the_mean_of_the_two_directions_per_token(tiny_bilm):
    model, head, params, batch = tiny_bilm
    loss, metrics = jax.jit(
        lambda p: BidirectionalLM()(model, head, p, batch, jax.random.key(2), jnp.int32(0), ids=SPECIAL_IDS)
    )(params)
    nlls = jax.jit(lambda p: direction_nlls(model, head, p, batch))(params)
    tokens = float(nlls["tokens"])
    assert float(metrics["forward_loss"]) == pytest.approx(float(nlls["forward"]) / tokens, rel=1e-5)
    assert float(metrics["backward_loss"]) == pytest.approx(float(nlls["backward"]) / tokens, rel=1e-5)
    assert float(loss) == pytest.approx(0.5 * float(nlls["forward"] + nlls["backward"]) / tokens, rel=1e-5)
