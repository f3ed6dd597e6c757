"""BERT's masked LM: the 15% / 80-10-10 corruption by chi-square on a fixed key, the loss at
the selected positions only, and the exact masked-token NLL."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from objective_toys import initialized_on_random_tokens

from seqjax.config import HeadConfig, ModelConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import build_head
from seqjax.model_head import token_log_probs
from seqjax.models import build_model
from seqjax.objectives import MaskedLM
from seqjax.objectives.masked_lm import EVAL_RATE, MaskedLMOptions, encoded, mask_tokens, masked_nll

V, B, T = 12, 3, 8
MASK = SPECIAL_IDS.mask_id(V)
CHI2_999 = {1: 10.828, 2: 13.816}  # 0.999 quantiles: a correct draw fails one time in 1000


def chi_square(observed, expected_probabilities):
    observed = np.asarray(observed, np.float64)
    expected = observed.sum() * np.asarray(expected_probabilities)
    return ((observed - expected) ** 2 / expected).sum()


@pytest.fixture(scope="module")
def corruption():
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(SPECIAL_IDS.count, V, size=(400, 100)), jnp.int32)
    valid = jnp.arange(100) < jnp.asarray(rng.integers(50, 101, size=(400, 1)))
    masking = MaskedLMOptions(rate=0.15, mask_prob=0.8, random_prob=0.1)
    corrupted, selected = mask_tokens(tokens, valid, jax.random.key(42), masking, ids=SPECIAL_IDS, vocab_size=V)
    return np.asarray(tokens), np.asarray(valid), np.asarray(corrupted), np.asarray(selected)


def test_fifteen_percent_of_valid_tokens_are_selected_and_no_padding(corruption):
    tokens, valid, corrupted, selected = corruption
    assert not selected[~valid].any()
    assert chi_square([selected[valid].sum(), (~selected[valid]).sum()], [0.15, 0.85]) < CHI2_999[1]
    np.testing.assert_array_equal(corrupted[~selected], tokens[~selected])


def test_selected_tokens_are_shown_as_mask_random_or_themselves_80_10_10(corruption):
    tokens, _, corrupted, selected = corruption
    shown, original = corrupted[selected], tokens[selected]
    words = V - SPECIAL_IDS.count
    # A random draw equal to the original shows the token itself: 0.1 / words of the selected.
    counts = [(shown == MASK).sum(), ((shown != MASK) & (shown != original)).sum(), (shown == original).sum()]
    probabilities = [0.8, 0.1 * (1 - 1 / words), 0.1 + 0.1 / words]
    assert chi_square(counts, probabilities) < CHI2_999[2]
    random_words = shown[(shown != MASK) & (shown != original)]
    assert random_words.min() >= SPECIAL_IDS.count and random_words.max() < V


def test_options_are_checked():
    for bad in (dict(rate=0.0), dict(mask_prob=1.2), dict(mask_prob=0.8, random_prob=0.3)):
        with pytest.raises(ValueError, match=next(reversed(bad))):
            MaskedLM(**bad)


@pytest.fixture(scope="module")
def tiny_encoder():
    model = build_model(
        ModelConfig(kind="transformer_encoder", d_model=16, layers=1, num_heads=2, d_ff=32, dropout=0.0, max_len=T), V
    )
    head = build_head(HeadConfig(kind="full", tied=True), V, np.ones(V))
    return initialized_on_random_tokens(model, head, V, jnp.ones((B, T)).at[2, 5:].set(0.0))


def selected_nll(model, head, params, batch, corrupted, selected):
    """Σ and mean of −log p(original) over the selected positions, from the exact log-probs in numpy."""
    log_probs = jax.jit(
        lambda p: token_log_probs(
            model, head, p, encoded(model, p, corrupted, batch["mask"] > 0, jax.random.key(0), train=False)
        )
    )(params)
    log_probs = np.asarray(log_probs, np.float64)
    nll = -np.take_along_axis(log_probs, np.asarray(batch["targets"])[..., None], axis=-1)[..., 0]
    selected = np.asarray(selected)
    return nll[selected].sum(), nll[selected].mean()


@pytest.mark.slow
def test_loss_is_the_mean_nll_of_the_original_tokens_at_the_selected_positions_only(tiny_encoder):
    model, head, params, batch = tiny_encoder
    objective = MaskedLM(rate=0.5)
    key = jax.random.key(3)
    loss, metrics = jax.jit(lambda p: objective(model, head, p, batch, key, jnp.int32(0), ids=SPECIAL_IDS))(params)
    mask_key = jax.random.split(key, 3)[0]
    corrupted, selected = mask_tokens(
        batch["targets"], batch["mask"] > 0, mask_key, objective, ids=SPECIAL_IDS, vocab_size=V
    )
    assert 0 < int(selected.sum()) < int(batch["mask"].sum())
    _, want = selected_nll(model, head, params, batch, corrupted, selected)
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert float(metrics["selected"]) == pytest.approx(float(selected.sum() / batch["mask"].sum()))


def test_masked_nll_scores_the_eval_positions_shown_as_mask(tiny_encoder):
    model, head, params, batch = tiny_encoder
    key = jax.random.key(0)
    sums = jax.jit(lambda p: masked_nll(model, head, p, batch, key, ids=SPECIAL_IDS))(params)
    eval_masking = MaskedLMOptions(rate=EVAL_RATE, mask_prob=1.0, random_prob=0.0)
    corrupted, selected = mask_tokens(
        batch["targets"], batch["mask"] > 0, key, eval_masking, ids=SPECIAL_IDS, vocab_size=V
    )
    assert np.all(np.asarray(corrupted)[np.asarray(selected)] == MASK)
    want, _ = selected_nll(model, head, params, batch, corrupted, selected)
    assert float(sums["nll"]) == pytest.approx(want, rel=1e-5)
    assert (float(sums["masked"]), float(sums["positions"])) == (float(selected.sum()), float(batch["mask"].sum()))
