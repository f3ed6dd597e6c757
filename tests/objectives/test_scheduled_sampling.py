"""Scheduled sampling: ε = 1 is teacher forcing, ε = 0 with argmax feeds the greedy decode,
and the parallel n-pass variant converges to the sequential one."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from objective_toys import lm_batch, tiny

from seqjax import decoding
from seqjax.contracts import SPECIAL_IDS
from seqjax.data import EOS_ID
from seqjax.model_head import init_decode_state, make_step_fn
from seqjax.objectives import ScheduledSampling, TeacherForcing
from seqjax.objectives.scheduled_sampling import gold_coins, parallel_inputs, scan_inputs

ALWAYS_GOLD = dict(schedule="linear", k=1.0, c=0.0, eps_min=0.0)
VOCAB, LENGTH = 11, 6


@pytest.mark.parametrize("kind, mode", [("rnn", "scan"), ("transformer", "parallel")])
def test_epsilon_one_equals_teacher_forcing_in_loss_and_gradient(kind, mode):
    batch = lm_batch(np.random.default_rng(0), 3, LENGTH, VOCAB, seq2seq="seq2seq" in kind)
    model, head, params = tiny(kind, vocab=VOCAB, batch=batch)
    key, step = jax.random.key(1), jnp.int32(0)

    def sampled(p):
        return ScheduledSampling(mode=mode, **ALWAYS_GOLD)(model, head, p, batch, key, step, ids=SPECIAL_IDS)

    def forced(p):
        return TeacherForcing()(model, head, p, batch, key, step, ids=SPECIAL_IDS)

    (loss, metrics), grads = jax.jit(jax.value_and_grad(sampled, has_aux=True))(params)
    (expected_loss, _), expected_grads = jax.jit(jax.value_and_grad(forced, has_aux=True))(params)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
    assert float(metrics["epsilon"]) == 1.0 and float(metrics["gold_fed"]) == 1.0
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(expected_grads)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_epsilon_zero_with_argmax_feeds_the_greedy_decode():
    batch = lm_batch(np.random.default_rng(1), 4, LENGTH, VOCAB)
    model, head, params = tiny("rnn", vocab=VOCAB, batch=batch, seed=3)
    never_gold = jnp.zeros(batch["inputs"].shape, bool)
    scan = jax.jit(functools.partial(scan_inputs, model, head, feed="argmax"))
    _, fed = scan(params, batch, never_gold, jax.random.key(0))
    greedy, lengths = decoding.greedy(
        make_step_fn(model, head, params),
        init_decode_state(model, params, batch["inputs"].shape[0], LENGTH, batch),
        bos_id=EOS_ID,
        eos_id=EOS_ID,
        pad_id=0,
        max_len=LENGTH - 1,
    )
    fed, greedy, lengths = np.asarray(fed), np.asarray(greedy), np.asarray(lengths)
    assert (fed[:, 0] == EOS_ID).all()
    for row in range(len(fed)):
        np.testing.assert_array_equal(fed[row, 1 : lengths[row] + 1], greedy[row, : lengths[row]])


def test_parallel_passes_equal_to_the_length_feed_the_same_tokens_as_the_scan():
    batch = lm_batch(np.random.default_rng(2), 4, LENGTH, VOCAB)
    model, head, params = tiny("transformer", vocab=VOCAB, batch=batch, seed=5)
    gold = gold_coins(jax.random.key(7), batch["inputs"].shape, 0.4)
    scan = jax.jit(functools.partial(scan_inputs, model, head, feed="argmax"))
    _, sequential = scan(params, batch, gold, jax.random.key(0))
    parallel = functools.partial(parallel_inputs, model, head, feed="argmax", passes=LENGTH)
    _, fed = jax.jit(parallel)(params, batch, gold, jax.random.key(0))
    np.testing.assert_array_equal(fed, sequential)
    assert not np.array_equal(fed, batch["inputs"])  # the model's tokens were fed somewhere


def test_gold_coins_come_up_with_probability_epsilon_and_always_at_the_start():
    coins = np.asarray(gold_coins(jax.random.key(0), (400, 50), 0.3))
    assert coins[:, 0].all()
    later = coins[:, 1:]
    # 4 standard deviations of a binomial proportion over 19,600 flips.
    assert abs(later.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / later.size)


def test_soft_feed_backpropagates_through_the_first_pass_only_when_asked():
    batch = lm_batch(np.random.default_rng(3), 2, LENGTH, VOCAB)
    model, head, params = tiny("rnn", vocab=VOCAB, batch=batch)  # the passes work for any model
    never_gold = dict(schedule="linear", k=1e-6, c=0.0, eps_min=0.0, feed="soft", mode="parallel")

    def grads(params, first_pass_grad):
        def loss(p):
            objective = ScheduledSampling(first_pass_grad=first_pass_grad, **never_gold)
            return objective(model, head, p, batch, jax.random.key(0), jnp.int32(0), ids=SPECIAL_IDS)[0]

        return jax.grad(loss)(params)

    detached, attached = jax.jit(lambda p: (grads(p, False), grads(p, True)))(params)
    differences = [float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(detached), jax.tree.leaves(attached))]
    assert max(differences) > 1e-6


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(feed="soft", mode="scan"), "feed must be argmax or sample for mode=scan"),
        (dict(first_pass_grad=True), "first_pass_grad needs feed=soft"),
        (dict(passes=1, mode="parallel"), "passes must be an int >= 2"),
        (dict(mode="beam"), "mode must be one of"),
        (dict(schedule="exponential", k=2.0), "k must be a number in \\(0, 1\\) for the exponential"),
    ],
)
def test_bad_options_are_rejected_before_tracing(options, message):
    with pytest.raises(ValueError, match=message):
        ScheduledSampling(**options)
