"""Random replacement: rates and pools as configured, labels and start token untouched."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from objective_toys import lm_batch, tiny

from seqjax.contracts import SPECIAL_IDS
from seqjax.data import SPECIAL_TOKENS
from seqjax.model_head import head_loss, hidden_states
from seqjax.objectives import RandomReplacement, TeacherForcing
from seqjax.objectives.random_replacement import replace_inputs

ROWS, LENGTH, VOCAB = 4000, 12, 50


def padded_batch(seed: int):
    """Random rows whose last 3 positions are padding (mask 0)."""
    batch = dict(lm_batch(np.random.default_rng(seed), ROWS, LENGTH, VOCAB))
    batch["mask"] = batch["mask"].at[:, -3:].set(0.0)
    return batch


def replace(batch, **options):
    options = dict(dict(vocab_size=VOCAB, sequence_rate=0.5, token_rate=0.3, pool="target"), **options)
    inputs, replaced = replace_inputs(batch, jax.random.key(0), ids=SPECIAL_IDS, **options)
    return np.asarray(inputs), np.asarray(replaced)


def test_replaced_fraction_and_untouched_rows_match_the_rates():
    batch = padded_batch(0)
    _, replaced = replace(batch, sequence_rate=0.5, token_rate=0.3)
    eligible = LENGTH - 1 - 3  # neither the start token nor padding
    fraction = replaced.sum() / (ROWS * eligible)
    assert abs(fraction - 0.15) < 4 * np.sqrt(0.15 * 0.85 / (ROWS * eligible))
    untouched = (~replaced.any(axis=1)).mean()
    expected = 0.5 + 0.5 * 0.7**eligible
    assert abs(untouched - expected) < 4 * np.sqrt(expected * (1 - expected) / ROWS)


def test_start_token_and_padding_are_never_replaced():
    _, replaced = replace(padded_batch(1), sequence_rate=1.0, token_rate=1.0)
    assert not replaced[:, 0].any() and not replaced[:, -3:].any()
    assert replaced[:, 1:-3].all()


def test_target_pool_draws_uniformly_from_the_rows_own_tokens():
    batch = padded_batch(2)
    rows = np.arange(ROWS)
    # Row r's real decoder inputs after the start are the distinct ids 4 + (r + j) mod 40.
    own = 4 + (rows[:, None] + np.arange(LENGTH - 4)) % 40
    batch["inputs"] = batch["inputs"].at[:, 1 : LENGTH - 3].set(own)
    inputs, replaced = replace(batch, sequence_rate=1.0, token_rate=1.0)
    positions = (inputs[:, 1 : LENGTH - 3] - 4 - rows[:, None]) % 40  # index j of the drawn token
    assert (positions < LENGTH - 4).all()
    counts = np.bincount(positions.ravel(), minlength=LENGTH - 4)
    expected = positions.size / (LENGTH - 4)
    chi_square = ((counts - expected) ** 2 / expected).sum()
    assert chi_square < 27.9  # 99.9% quantile of chi-square with 7 degrees of freedom


def test_vocab_pool_draws_uniformly_from_the_non_special_ids():
    inputs, replaced = replace(padded_batch(3), sequence_rate=1.0, token_rate=1.0, pool="vocab")
    drawn = inputs[replaced]
    assert drawn.min() >= len(SPECIAL_TOKENS) and drawn.max() < VOCAB
    counts = np.bincount(drawn - len(SPECIAL_TOKENS), minlength=VOCAB - len(SPECIAL_TOKENS))
    expected = drawn.size / len(counts)
    assert ((counts - expected) ** 2 / expected).sum() < 84.0  # 99.9% quantile, 45 degrees of freedom


def test_objective_is_teacher_forcing_on_the_noisy_inputs_with_gold_labels():
    batch = lm_batch(np.random.default_rng(4), 3, 6, 11)
    model, head, params = tiny("rnn", vocab=11, batch=batch)
    key, step = jax.random.key(5), jnp.int32(0)
    options = dict(sequence_rate=1.0, token_rate=0.5, pool="target")

    def both(params):
        loss, metrics = RandomReplacement(**options)(model, head, params, batch, key, step, ids=SPECIAL_IDS)
        replace_key, model_key, head_key = jax.random.split(key, 3)
        noisy, _ = replace_inputs(batch, replace_key, ids=SPECIAL_IDS, vocab_size=11, **options)
        assert noisy.shape == batch["targets"].shape
        hidden = hidden_states(model, params, batch, model_key, train=True, inputs=noisy)
        expected, _ = head_loss(model, head, params, hidden, batch, head_key)
        clean, _ = TeacherForcing()(model, head, params, batch, key, step, ids=SPECIAL_IDS)
        return loss, expected, clean, metrics["replaced"]

    loss, expected, clean, replaced = jax.jit(both)(params)
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    assert float(replaced) > 0 and not np.isclose(loss, clean)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(sequence_rate=1.5), "sequence_rate must be a finite number in \\[0.0, 1.0\\], got 1.5"),
        (dict(token_rate=-0.1), "token_rate must be a finite number in \\[0.0, 1.0\\], got -0.1"),
        (dict(pool="corpus"), "pool must be one of"),
    ],
)
def test_bad_rates_and_pools_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        RandomReplacement(**options)
