"""Minimum-risk training (Shen et al. 2016): minimize the expected cost over candidates.

For each source, n candidates come from the model (ancestral samples, or the n best of a
beam search); duplicates are kept once. Their distribution is the model's, restricted
to the candidates, renormalized and sharpened by α:

    Q(y) = p(y)^α / Σ_{y' in candidates} p(y')^α,      risk = Σ_y Q(y)·(1 − BLEU(y) / 100),

and the loss is the risk averaged over sources. α → 0 flattens Q (Shen et al. use 5e-3
with 100 samples); α = 1 is the model's own distribution on the candidates. Candidates are
drawn without gradients; log p(y) is scored by a teacher-forced pass without dropout.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from seqjax import decoding
from seqjax.data import BOS_ID, EOS_ID, PAD_ID
from seqjax.contracts import Batch, Params, SpecialIds
from seqjax.model_head import init_decode_state, make_step_fn
from seqjax.objectives.checks import check_int, check_number, check_one_of
from seqjax.objectives.reinforce import mix_with_mle
from seqjax.objectives.rollout import choose, rollout
from seqjax.objectives.sequences import (
    bleu_rewards,
    candidate_log_probs,
    lengths_after,
    repeat_rows,
    start_state,
    start_step_fn,
    truncate,
    valid_rows,
)

CANDIDATES = ("sample", "beam")


def check_minimum_risk(*, samples: int, candidates: str, alpha: float, mle_weight: float) -> None:
    check_int("samples", samples, 1)
    check_one_of("candidates", candidates, CANDIDATES)
    check_number("alpha", alpha, 0.0, open_low=True)
    check_number("mle_weight", mle_weight, 0.0, 1.0)


def draw_candidates(
    model: nn.Module, head: nn.Module, params: Params, batch: Batch, key: jax.Array, *, samples: int, candidates: str
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """n = `samples` candidates per row, no gradient.

    Returns tokens [B·n, T] int32 (PAD after each length; row b·n + k is candidate k of row
    b), lengths [B·n] int32, and available [B, n] bool (False for a beam slot that had no
    hypothesis left, or a repeat of an earlier candidate of the same row).
    """
    check_minimum_risk(samples=samples, candidates=candidates, alpha=1.0, mle_weight=0.0)
    frozen = jax.lax.stop_gradient(params)
    rows, length = batch["inputs"].shape
    if candidates == "sample":
        repeated = repeat_rows(batch, samples)
        gold = jnp.zeros(repeated["inputs"].shape, bool)
        _, _, tokens = rollout(model, head, frozen, repeated, gold, key, choose("sample"))
        present = jnp.ones((rows, samples), bool)
    else:
        step_fn = start_step_fn(make_step_fn(model, head, frozen))
        state = start_state(init_decode_state(model, frozen, batch['inputs'].shape[0], length, batch), batch["inputs"][:, 0])
        sequences, scores = decoding.beam_search(
            step_fn, state, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID, beam_size=samples, max_len=length
        )
        tokens = sequences.reshape(rows * samples, length)
        present = jnp.isfinite(scores)
    lengths = lengths_after(tokens)
    tokens = truncate(tokens, lengths)
    return tokens, lengths, first_occurrences(tokens.reshape(rows, samples, length), present)


def first_occurrences(candidates: jax.Array, present: jax.Array) -> jax.Array:
    """[B, n] bool: present candidates [B, n, T] that do not repeat an earlier present one."""
    n = candidates.shape[1]
    same = jnp.all(candidates[:, :, None, :] == candidates[:, None, :, :], axis=-1)
    earlier = jnp.tril(jnp.ones((n, n), bool), k=-1)
    return present & ~jnp.any(same & earlier & present[:, None, :], axis=-1)


def expected_risk(log_probs: jax.Array, costs: jax.Array, available: jax.Array, *, alpha: float) -> jax.Array:
    """Σ_k Q_k·cost_k per row, Q = softmax(α·log p) over the available candidates.

    log_probs, costs: [B, n] float32; available: [B, n] bool (at least one per row).
    Returns [B] float32.
    """
    weights = jax.nn.softmax(jnp.where(available, alpha * log_probs, -jnp.inf), axis=-1)
    return jnp.sum(jnp.where(available, weights * costs, 0.0), axis=-1)


def minimum_risk(
    model: nn.Module,
    head: nn.Module,
    params: Params,
    batch: Batch,
    key: jax.Array,
    step: jax.Array,
    *,
    ids: SpecialIds,
    samples: int = 8,
    candidates: str = "sample",
    alpha: float = 5e-3,
    mle_weight: float = 0.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Expected (1 − sentence BLEU / 100) under Q on n = `samples` candidates per row.

    Returns:
      loss: [] float32, w·teacher forcing + (1 − w)·mean risk (w = mle_weight).
      metrics: "risk", "reward" (mean BLEU / 100 of the distinct candidates), "distinct"
        (distinct candidates / n), "tokens" (and "mle_loss" if w > 0).
    """
    check_minimum_risk(samples=samples, candidates=candidates, alpha=alpha, mle_weight=mle_weight)
    draw_key, mle_key = jax.random.split(key)
    rows = batch["inputs"].shape[0]
    tokens, lengths, available = draw_candidates(
        model, head, params, batch, draw_key, samples=samples, candidates=candidates
    )
    repeated = repeat_rows(batch, samples)
    rewards = bleu_rewards(tokens, lengths, repeated).reshape(rows, samples)
    token_log_probs = candidate_log_probs(model, head, params, repeated, tokens)
    within = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
    log_probs = jnp.sum(jnp.where(within, token_log_probs, 0.0), axis=1).reshape(rows, samples)
    risk = expected_risk(log_probs, 1.0 - rewards, available, alpha=alpha)
    weights = valid_rows(batch)
    normalizer = jnp.maximum(weights.sum(), 1.0)
    counts = jnp.maximum(available.sum(axis=1), 1)
    metrics = {
        "risk": jnp.sum(weights * risk) / normalizer,
        "reward": jnp.sum(weights * jnp.sum(jnp.where(available, rewards, 0.0), axis=1) / counts) / normalizer,
        "distinct": jnp.sum(weights * available.sum(axis=1)) / (normalizer * samples),
    }
    loss = metrics["risk"]
    return mix_with_mle(model, head, params, batch, mle_key, step, loss, metrics, mle_weight)
