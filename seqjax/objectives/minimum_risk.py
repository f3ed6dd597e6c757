"""Minimum-risk training (Shen et al. 2016): the objective `MinimumRisk`, its candidates
(`draw_candidates`) and its risk (`expected_risk`)."""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp

from seqjax import decoding
from seqjax.checks import integer, number
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import init_decode_state, make_step_fn
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

Search = Literal["sample", "beam"]  # how candidates are found


def draw_candidates(
    model: Model,
    head: Head,
    params: Params,
    batch: Batch,
    key: jax.Array,
    *,
    ids: SpecialIds,
    num_candidates: int,
    search: str,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """n = `num_candidates` candidates per row by `search` ("sample": ancestral samples;
    "beam": the n best of a beam search), no gradient.

    Returns tokens [B·n, T] int32 (`ids.pad` after each length; row b·n + k is candidate k of
    row b), lengths [B·n] int32, and available [B, n] bool (False for a beam slot that had no
    hypothesis left, or a repeat of an earlier candidate of the same row).
    """
    n = num_candidates
    frozen = jax.lax.stop_gradient(params)
    rows, length = batch["inputs"].shape
    if search == "sample":
        repeated = repeat_rows(batch, n)
        gold = jnp.zeros(repeated["inputs"].shape, bool)
        _, _, tokens = rollout(model, head, frozen, repeated, gold, key, choose("sample"))
        present = jnp.ones((rows, n), bool)
    else:
        step_fn = start_step_fn(make_step_fn(model, head, frozen))
        state = start_state(init_decode_state(model, frozen, rows, length, batch), batch["inputs"][:, 0])
        sequences, scores = decoding.beam_search(
            step_fn, state, bos_id=ids.bos, eos_id=ids.eos, pad_id=ids.pad, beam_size=n, max_len=length
        )
        tokens = sequences.reshape(rows * n, length)
        present = jnp.isfinite(scores)
    lengths = lengths_after(tokens, ids=ids)
    tokens = truncate(tokens, lengths, ids=ids)
    return tokens, lengths, first_occurrences(tokens.reshape(rows, n, length), present)


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


@dataclasses.dataclass(frozen=True)
class MinimumRiskOptions(Options):
    """Minimum-risk training's candidates, sharpness and mix with teacher forcing."""

    num_candidates: int = option(8, "n, candidates per source", check=integer())
    search: Search = option("sample", "how candidates are found: sample (ancestral) | beam (the n best)")
    alpha: float = option(5e-3, "Q ∝ p^alpha on the candidates", check=number(0.0, open_low=True))
    mle_weight: float = option(0.0, "w of loss = w·teacher forcing + (1 − w)·risk", check=number(0.0, 1.0))


@dataclasses.dataclass(frozen=True)
class MinimumRisk(MinimumRiskOptions, Objective):
    """Minimum-risk training (Shen et al. 2016): minimize the expected cost over candidates.

    For each source, n = `num_candidates` candidates come from the model (ancestral samples,
    or the n best of a beam search: `search`); duplicates are kept once. Their distribution
    is the model's, restricted to the candidates, renormalized and sharpened by α:

        Q(y) = p(y)^α / Σ_{y' in candidates} p(y')^α,      risk = Σ_y Q(y)·(1 − BLEU(y) / 100),

    and the loss is the risk averaged over sources. α → 0 flattens Q (Shen et al. use 5e-3
    with 100 samples); α = 1 is the model's own distribution on the candidates. Candidates are
    drawn without gradients; log p(y) is scored by a teacher-forced pass without dropout.
    `mle_weight` w mixes in teacher forcing: loss = w·teacher forcing + (1 − w)·risk.
    """

    def __call__(
        self,
        model: Model,
        head: Head,
        params: Params,
        batch: Batch,
        key: jax.Array,
        step: jax.Array,
        *,
        ids: SpecialIds,
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Returns:
        loss: [] float32, w·teacher forcing + (1 − w)·mean risk (w = mle_weight).
        metrics: dict of [] float32: "risk", "reward" (mean BLEU / 100 of the distinct
          candidates), "distinct" (distinct candidates / n), "tokens" (and "mle_loss" if w > 0).
        """
        n = self.num_candidates
        draw_key, mle_key = jax.random.split(key)
        rows = batch["inputs"].shape[0]
        tokens, lengths, available = draw_candidates(
            model, head, params, batch, draw_key, ids=ids, num_candidates=n, search=self.search
        )
        repeated = repeat_rows(batch, n)
        rewards = bleu_rewards(tokens, lengths, repeated, ids=ids).reshape(rows, n)
        token_log_probs = candidate_log_probs(model, head, params, repeated, tokens)
        within = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
        log_probs = jnp.sum(jnp.where(within, token_log_probs, 0.0), axis=1).reshape(rows, n)
        risk = expected_risk(log_probs, 1.0 - rewards, available, alpha=self.alpha)
        weights = valid_rows(batch)
        normalizer = jnp.maximum(weights.sum(), 1.0)
        counts = jnp.maximum(available.sum(axis=1), 1)
        metrics = {
            "risk": jnp.sum(weights * risk) / normalizer,
            "reward": jnp.sum(weights * jnp.sum(jnp.where(available, rewards, 0.0), axis=1) / counts) / normalizer,
            "distinct": jnp.sum(weights * available.sum(axis=1)) / (normalizer * n),
        }
        loss = metrics["risk"]
        return mix_with_mle(model, head, params, batch, mle_key, step, loss, metrics, self.mle_weight, ids=ids)


OBJECTIVES.register("minimum_risk", MinimumRisk, options=MinimumRiskOptions)
