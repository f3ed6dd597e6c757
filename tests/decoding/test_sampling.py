"""Sampling: the truncations against numpy, and empirical frequencies against the truncated distribution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.decoding import sample, scale_temperature, truncate_top_k, truncate_top_p

# Upper 0.1% points of the chi-square distribution, by degrees of freedom.
CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515}
PROBS = np.array([0.12, 0.3, 0.05, 0.25, 0.08, 0.2])


def reference_truncation(probs, *, temperature=1.0, top_k=None, top_p=None):
    """Temperature, then the k most probable, then the smallest top set of mass >= p; renormalized."""
    probs = probs ** (1.0 / temperature)
    probs = probs / probs.sum()
    order = np.argsort(-probs, kind="stable")
    kept = len(probs) if top_k is None else top_k
    if top_p is not None:
        mass = np.cumsum(probs[order[:kept]] / probs[order[:kept]].sum())
        kept = int(np.argmax(mass >= top_p)) + 1 if mass[-1] >= top_p else kept
    truncated = np.zeros_like(probs)
    truncated[order[:kept]] = probs[order[:kept]]
    return truncated / truncated.sum()


def log_probs_rows(rows):
    return jnp.log(jnp.asarray(rows, jnp.float32))


@given(st.integers(0, 2**31 - 1), st.integers(1, 7))
@settings(max_examples=25, deadline=None)
def test_top_k_keeps_exactly_the_k_most_probable_tokens_renormalized(seed, k):
    probs = np.random.default_rng(seed).dirichlet(np.ones(7), size=3)
    result = np.exp(np.asarray(jax.jit(truncate_top_k, static_argnums=1)(log_probs_rows(probs), k)))
    expected = np.stack([reference_truncation(row, top_k=k) for row in probs])
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-7)


@given(st.integers(0, 2**31 - 1), st.integers(1, 7), st.floats(0.05, 0.95))
@settings(max_examples=25, deadline=None)
def test_top_p_keeps_the_smallest_most_probable_set_reaching_p(seed, kept, fraction):
    rng = np.random.default_rng(seed)
    # Every probability is >= 0.5 / 7, so p lies >= 0.003 from the masses float32 must compare it with.
    probs = 0.5 * rng.dirichlet(np.ones(7)) + 0.5 / 7
    mass = np.concatenate([[0.0], np.cumsum(np.sort(probs)[::-1])])
    p = mass[kept - 1] + fraction * (mass[kept] - mass[kept - 1])  # the `kept` most probable reach p, fewer do not
    rows = np.stack([rng.permutation(probs) for _ in range(3)])  # one distribution in three orders
    result = np.exp(np.asarray(jax.jit(truncate_top_p)(log_probs_rows(rows), p)))
    np.testing.assert_array_equal((result > 0).sum(axis=1), kept)
    expected = np.stack([reference_truncation(row, top_p=p) for row in rows])
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("p, kept", [(0.5, [1]), (0.75, [1, 4]), (0.875, [1, 4, 2])])
def test_top_p_drops_the_token_whose_mass_above_equals_p_exactly(p, kept):
    # Powers of two: the masses above each rank (0, 0.5, 0.75, 0.875, 0.9375) are exact in
    # float32, so p meets one of them exactly; a token is kept only when the mass above it is < p.
    probs = np.array([0.0625, 0.5, 0.125, 0.0625, 0.25])
    result = np.exp(np.asarray(truncate_top_p(log_probs_rows([probs]), p)))
    expected = np.zeros(5)
    expected[kept] = probs[kept] / p
    np.testing.assert_allclose(result[0], expected, rtol=1e-6, atol=1e-7)


def test_top_p_keeps_the_most_probable_token_even_for_tiny_p():
    result = np.exp(np.asarray(truncate_top_p(log_probs_rows([PROBS]), 1e-6)))
    np.testing.assert_allclose(result[0], np.eye(6)[1], atol=1e-7)


def test_temperature_raises_probabilities_to_one_over_t_and_renormalizes():
    result = np.exp(np.asarray(scale_temperature(log_probs_rows([PROBS]), 0.5)))
    np.testing.assert_allclose(result[0], PROBS**2 / np.sum(PROBS**2), rtol=1e-5)


def fixed_distribution(state, tokens):
    return state["log_probs"], state


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 0.5},
        {"temperature": 2.0},
        {"top_k": 3},
        {"top_p": 0.6},
        {"temperature": 2.0, "top_k": 4, "top_p": 0.8},
    ],
)
def test_sampled_frequencies_match_the_truncated_renormalized_distribution(options):
    rows = 20000
    state = {"log_probs": jnp.broadcast_to(log_probs_rows(PROBS), (rows, 6))}
    keys = jax.random.split(jax.random.key(0), rows)
    tokens, lengths = sample(fixed_distribution, state, keys, bos_id=0, eos_id=5, pad_id=0, max_len=1, **options)
    counts = np.bincount(np.asarray(tokens[:, 0]), minlength=6)
    expected = rows * reference_truncation(PROBS, **options)
    support = expected > 0
    assert np.all(counts[~support] == 0)
    chi2 = np.sum((counts[support] - expected[support]) ** 2 / expected[support])
    assert chi2 < CHI2_999[int(support.sum()) - 1]


def test_each_row_draws_each_step_with_the_fold_in_of_its_own_key():
    rows, max_len, vocab = 4000, 4, 5
    # EOS (id 0) has no mass, so every row runs max_len steps of the same uniform draw over ids 1-4.
    log_probs = jnp.log(jnp.broadcast_to(jnp.asarray([0.0, 0.25, 0.25, 0.25, 0.25]), (rows, vocab)))
    keys = jax.random.split(jax.random.key(6), rows)
    tokens, lengths = sample(
        fixed_distribution, {"log_probs": log_probs}, keys, bos_id=1, eos_id=0, pad_id=0, max_len=max_len
    )
    tokens = np.asarray(tokens)
    np.testing.assert_array_equal(lengths, max_len)
    # The documented schedule: row b draws step t with categorical(fold_in(keys[b], t)).
    for b in (0, 1, rows - 1):
        by_hand = [jax.random.categorical(jax.random.fold_in(keys[b], t), log_probs[b]) for t in range(max_len)]
        np.testing.assert_array_equal(tokens[b], by_hand)
    # Steps 0, 1 and steps 2, 3 are independent draws: the 16 token pairs of each are uniform
    # (chi-square, 15 degrees of freedom, upper 0.1% point 37.70).
    pairs = np.bincount(((tokens[:, 0::2] - 1) * 4 + tokens[:, 1::2] - 1).ravel(), minlength=16)
    expected = rows * (max_len // 2) / 16
    assert np.sum((pairs - expected) ** 2 / expected) < 37.70, pairs


def test_sample_is_a_function_of_the_keys(prefix_lm):
    max_len = 4
    state = prefix_lm.init_state(prefix_lm.random_table(np.random.default_rng(8), 16, 3, max_len), max_len)

    def draw(key):
        keys = jax.random.split(key, 16)
        return sample(prefix_lm.step_fn, state, keys, bos_id=1, eos_id=0, pad_id=0, max_len=max_len, top_k=2)[0]

    np.testing.assert_array_equal(draw(jax.random.key(1)), draw(jax.random.key(1)))
    assert np.any(np.asarray(draw(jax.random.key(1))) != np.asarray(draw(jax.random.key(2))))


def test_a_rows_sample_does_not_depend_on_the_batch_it_is_drawn_in(prefix_lm):
    """The rows of one batch, drawn again as another batch of them in another order and with
    other rows, give the same tokens: a row's draws are its key's and its distributions'."""
    max_len = 5
    table = prefix_lm.random_table(np.random.default_rng(4), 12, 4, max_len, eos_id=2, eos_bias=0.5)
    keys = jax.random.split(jax.random.key(9), 12)

    def draw(rows):
        state = prefix_lm.init_state(table[rows], max_len)
        return np.asarray(
            sample(prefix_lm.step_fn, state, keys[rows], bos_id=1, eos_id=2, pad_id=0, max_len=max_len)[0]
        )

    together = draw(np.arange(12))
    apart = np.array([7, 2, 11, 0, 5])
    np.testing.assert_array_equal(draw(apart), together[apart])
    assert len({tuple(row) for row in together}) > 6  # the rows' draws differ


def test_sampled_rows_end_at_their_first_eos_and_are_padded_after_it(prefix_lm):
    max_len, eos_id = 5, 2
    table = prefix_lm.random_table(np.random.default_rng(9), 32, 4, max_len, eos_id=eos_id, eos_bias=1.0)
    tokens, lengths = sample(
        prefix_lm.step_fn,
        prefix_lm.init_state(table, max_len),
        jax.random.split(jax.random.key(3), 32),
        bos_id=1,
        eos_id=eos_id,
        pad_id=0,
        max_len=max_len,
    )
    tokens, lengths = np.asarray(tokens), np.asarray(lengths)
    assert 0 < np.sum(lengths < max_len) < 32
    for row, length in zip(tokens, lengths):
        assert eos_id not in row[: length - 1].tolist()
        assert length == max_len or row[length - 1] == eos_id
        np.testing.assert_array_equal(row[length:], 0)
