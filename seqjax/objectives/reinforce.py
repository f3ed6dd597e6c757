"""REINFORCE with a sentence-BLEU reward, and MIXER: the objectives `Reinforce` and `Mixer`
and the pure functions they are made of."""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp

from seqjax.checks import integer, number
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, Head, Model, Objective, Params, SpecialIds
from seqjax.objectives.rollout import choose_per_row, rollout
from seqjax.objectives.sequences import bleu_rewards, candidate_log_probs, lengths_after, repeat_rows, valid_rows
from seqjax.objectives.teacher_forcing import TeacherForcing

Baseline = Literal["self_critical", "mean", "none"]


def leave_one_out_mean(rewards: jax.Array) -> jax.Array:
    """[B, K] -> [B, K]: the mean of each row's other K − 1 rewards (K ≥ 2)."""
    k = rewards.shape[1]
    return (rewards.sum(axis=1, keepdims=True) - rewards) / (k - 1)


def reinforce_surrogate(
    log_probs: jax.Array, rewards: jax.Array, baselines: jax.Array, weights: jax.Array
) -> jax.Array:
    """−mean over rows and samples of (r − b)·log p(y), with r and b held constant.

    log_probs, rewards, baselines: [B, K] float32; weights: [B] float32 (0 drops a row).
    Returns [] float32, whose gradient is the REINFORCE estimate of −∇E[r].
    """
    advantage = jax.lax.stop_gradient(rewards - baselines)
    total = jnp.sum(weights[:, None] * advantage * log_probs)
    return -total / jnp.maximum(weights.sum() * log_probs.shape[1], 1.0)


def mixer_delta(step: jax.Array, *, delta_start: int, delta_growth: int, delta_every: int) -> jax.Array:
    """Δ at `step`: [] int32, delta_start + delta_growth·⌊step / delta_every⌋."""
    return delta_start + delta_growth * (jnp.asarray(step, jnp.int32) // delta_every)


def continue_after_prefix(
    model: Model,
    head: Head,
    params: Params,
    batch: Batch,
    prefix: jax.Array,
    key: jax.Array,
    greedy: jax.Array,
    *,
    ids: SpecialIds,
) -> tuple[jax.Array, jax.Array]:
    """Each row's gold targets before `prefix` [N] int32, then the model's own tokens, drawn
    (or the most probable where `greedy` [N] bool), without gradients.

    Returns tokens [N, T] int32 and lengths [N] int32 (to the first EOS at or after the prefix).
    """
    positions = jnp.arange(batch["inputs"].shape[1])
    gold = positions[None, :] <= prefix[:, None]
    _, _, chosen = rollout(model, head, jax.lax.stop_gradient(params), batch, gold, key, choose_per_row(greedy))
    tokens = jnp.where(positions[None, :] < prefix[:, None], batch["targets"], chosen)
    return tokens, lengths_after(tokens, prefix, ids=ids)


def prefix_reinforce_loss(
    model: Model,
    head: Head,
    params: Params,
    batch: Batch,
    key: jax.Array,
    prefix: jax.Array,
    *,
    ids: SpecialIds,
    num_samples: int,
    baseline: str,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Cross-entropy on each row's first `prefix` [B] int32 targets, REINFORCE after them.

    The K = `num_samples` samples of every row and, for the self-critical baseline, its greedy
    sequence are rolled out together (rows B·K + B) and rewarded by one BLEU computation.

    Returns the loss [] float32 (per-sequence sums averaged over sequences) and metrics
    "reward", "baseline" (means over real rows) and "sample_length".
    """
    rows = batch["inputs"].shape[0]
    drawn = rows * num_samples
    repeated, repeated_prefix = repeat_rows(batch, num_samples), jnp.repeat(prefix, num_samples)
    rollout_rows, rollout_prefix = repeated, repeated_prefix
    if baseline == "self_critical":
        rollout_rows = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), repeated, batch)
        rollout_prefix = jnp.concatenate([repeated_prefix, prefix])
    greedy = jnp.arange(rollout_prefix.shape[0]) >= drawn
    tokens, lengths = continue_after_prefix(model, head, params, rollout_rows, rollout_prefix, key, greedy, ids=ids)
    all_rewards = bleu_rewards(tokens, lengths, rollout_rows, ids=ids)
    rewards = all_rewards[:drawn].reshape(rows, num_samples)
    if baseline == "self_critical":
        baselines = jnp.broadcast_to(all_rewards[drawn:, None], rewards.shape)
    elif baseline == "mean":
        baselines = leave_one_out_mean(rewards)
    else:
        baselines = jnp.zeros_like(rewards)
    tokens, lengths = tokens[:drawn], lengths[:drawn]
    log_probs = candidate_log_probs(model, head, params, repeated, tokens)
    positions = jnp.arange(tokens.shape[1])[None, :]
    sampled = (positions >= repeated_prefix[:, None]) & (positions < lengths[:, None])
    gold = positions < repeated_prefix[:, None]
    weights = valid_rows(batch)
    sequence_log_probs = jnp.sum(jnp.where(sampled, log_probs, 0.0), axis=1).reshape(rows, num_samples)
    prefix_log_probs = jnp.sum(jnp.where(gold, log_probs, 0.0), axis=1).reshape(rows, num_samples)
    cross_entropy = -jnp.sum(weights[:, None] * prefix_log_probs) / jnp.maximum(weights.sum() * num_samples, 1.0)
    loss = cross_entropy + reinforce_surrogate(sequence_log_probs, rewards, baselines, weights)

    def row_mean(x: jax.Array) -> jax.Array:
        return jnp.sum(weights[:, None] * x) / jnp.maximum(weights.sum() * x.shape[1], 1.0)

    lengths = lengths.reshape(rows, num_samples).astype(jnp.float32)
    metrics = {"reward": row_mean(rewards), "baseline": row_mean(baselines), "sample_length": row_mean(lengths)}
    return loss, metrics


def mix_with_mle(
    model: Model,
    head: Head,
    params: Params,
    batch: Batch,
    key: jax.Array,
    step: jax.Array,
    loss: jax.Array,
    metrics: dict[str, jax.Array],
    mle_weight: float,
    *,
    ids: SpecialIds,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """w·teacher forcing + (1 − w)·loss for w = mle_weight (no teacher-forced pass when w = 0),
    with the batch's target tokens added to the metrics."""
    metrics = dict(metrics, tokens=batch["mask"].sum())
    if mle_weight == 0.0:
        return loss, metrics
    mle_loss, _ = TeacherForcing()(model, head, params, batch, key, step, ids=ids)
    return mle_weight * mle_loss + (1.0 - mle_weight) * loss, dict(metrics, mle_loss=mle_loss)


@dataclasses.dataclass(frozen=True)
class ReinforceOptions(Options):
    """REINFORCE's samples, baseline and mix with teacher forcing."""

    sequences_per_source: int = option(4, "K, sequences sampled per source", check=integer())
    baseline: Baseline = option("self_critical", "self_critical | mean (of the other samples) | none")
    mle_weight: float = option(0.0, "w of loss = w·teacher forcing + (1 − w)·sequence loss", check=number(0.0, 1.0))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.baseline == "mean" and self.sequences_per_source < 2:
            raise ValueError(
                "sequences_per_source must be >= 2 for the mean-of-the-others baseline, "
                f"got {self.sequences_per_source}"
            )


@dataclasses.dataclass(frozen=True)
class MixerOptions(ReinforceOptions):
    """MIXER's growth of Δ, beside REINFORCE's options."""

    delta_start: int = option(2, "Δ at step 0: the last Δ target tokens of a row are REINFORCE's", check=integer())
    delta_growth: int = option(2, "Δ grows by this every delta_every steps", check=integer(0))
    delta_every: int = option(1000, "steps between growths of Δ", check=integer())


@dataclasses.dataclass(frozen=True)
class Reinforce(ReinforceOptions, Objective):
    """REINFORCE with a sentence-BLEU reward (Williams 1992; Ranzato et al. 2016).

    For each source (batch row) K = `num_samples` sequences are sampled from the model, each
    rewarded with its sentence BLEU / 100 against the reference (the row's targets), computed
    by `sentence_bleu_ids` inside the step. The surrogate −(r − b)·log p(y) has the REINFORCE
    estimator as its gradient; b is a baseline that does not depend on the sample, so it
    lowers variance without biasing the gradient:

    * `self_critical` (Rennie et al. 2017): the reward of the greedy sequence;
    * `mean`: the mean reward of the row's other K − 1 samples (needs K ≥ 2);
    * `none`: b = 0.

    Samples start from the row's first decoder input (`<s>` for an encoder-decoder, the
    chunk's first token for a language model). Sampling runs one `lax.scan` over the decode
    step without gradients (rollout.py); the log-probabilities are then scored by a
    teacher-forced pass without dropout, so they are those of the sampling distribution.
    `mle_weight` w mixes the result with teacher forcing, for RL started from an MLE
    checkpoint: loss = w·teacher forcing + (1 − w)·surrogate.
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
        loss: [] float32, w·teacher forcing + (1 − w)·surrogate (w = mle_weight).
        metrics: dict of [] float32: "reward", "baseline", "sample_length" (means over real
          rows), "tokens" (and "mle_loss" if w > 0).
        """
        prefix = jnp.zeros(batch["inputs"].shape[:1], jnp.int32)
        return self._reinforce_after(model, head, params, batch, key, step, prefix, {}, ids=ids)

    def _reinforce_after(
        self,
        model: Model,
        head: Head,
        params: Params,
        batch: Batch,
        key: jax.Array,
        step: jax.Array,
        prefix: jax.Array,
        extra_metrics: dict[str, jax.Array],
        *,
        ids: SpecialIds,
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Cross-entropy on each row's first `prefix` [B] int32 targets, REINFORCE after them,
        mixed with teacher forcing; `extra_metrics` join the metrics."""
        rl_key, mle_key = jax.random.split(key)
        samples = self.sequences_per_source
        loss, metrics = prefix_reinforce_loss(
            model, head, params, batch, rl_key, prefix, ids=ids, num_samples=samples, baseline=self.baseline
        )
        return mix_with_mle(
            model, head, params, batch, mle_key, step, loss, dict(metrics, **extra_metrics), self.mle_weight, ids=ids
        )


@dataclasses.dataclass(frozen=True)
class Mixer(Reinforce, MixerOptions):
    """MIXER (Ranzato et al. 2016): cross-entropy on the first L − Δ target tokens of a row
    (L its length), REINFORCE (as `Reinforce`) on the last Δ, with Δ growing over training:

        Δ = delta_start + delta_growth·⌊step / delta_every⌋.

    With Δ ≥ L it is REINFORCE. The per-sequence losses (cross-entropy summed over the gold
    prefix, plus the surrogate) are averaged over sequences. Ranzato et al. learn a linear
    baseline from the decoder state; MIXER here takes `Reinforce`'s baselines
    (self-critical: the greedy continuation of the prefix).
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
        loss: [] float32, as `Reinforce`'s.
        metrics: dict of [] float32: those of `Reinforce` and "delta" (Δ at this step).
        """
        delta = mixer_delta(
            step, delta_start=self.delta_start, delta_growth=self.delta_growth, delta_every=self.delta_every
        )
        lengths = batch["mask"].sum(axis=1).astype(jnp.int32)
        prefix = jnp.maximum(lengths - delta, 0)
        extra = {"delta": delta.astype(jnp.float32)}
        return self._reinforce_after(model, head, params, batch, key, step, prefix, extra, ids=ids)


OBJECTIVES.register("reinforce", Reinforce, options=ReinforceOptions)
OBJECTIVES.register("mixer", Mixer, options=MixerOptions)
