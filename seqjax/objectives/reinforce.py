"""REINFORCE with a sentence-BLEU reward (Williams 1992; Ranzato et al. 2016), and MIXER.

For each source (batch row) K sequences are sampled from the model, each rewarded with its
sentence BLEU / 100 against the reference, computed by `sentence_bleu_ids` inside the step.
The surrogate −(r − b)·log p(y) has the REINFORCE estimator as its gradient; b is a baseline
that does not depend on the sample, so it lowers variance without biasing the gradient:

* `self_critical` (Rennie et al. 2017): the reward of the greedy sequence;
* `mean`: the mean reward of the row's other K − 1 samples (needs K ≥ 2);
* `none`: b = 0.

MIXER (Ranzato et al. 2016) keeps cross-entropy on the first L − Δ target tokens of a row
(L its length), and samples and reinforces only the last Δ, with Δ growing over training:
Δ = delta_start + delta_growth·⌊step / delta_every⌋. With Δ ≥ L it is REINFORCE. The
per-sequence losses (cross-entropy summed over the gold prefix, plus the surrogate) are
averaged over sequences. Ranzato et al. learn a linear baseline from the decoder state;
MIXER here takes the baselines above (self-critical: the greedy continuation of the prefix).

The reference of a row is its targets; samples start from the row's first decoder input
(`<s>` for an encoder-decoder, the chunk's first token for a language model).

Sampling runs one `lax.scan` over the decode step without gradients (rollout.py);
the log-probabilities are then scored by a teacher-forced pass without dropout, so they
are those of the sampling distribution. `mle_weight` w mixes the result with teacher
forcing, for RL started from an MLE checkpoint: w·teacher forcing + (1 − w)·this loss.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from seqjax.objectives.checks import check_int, check_number, check_one_of
from seqjax.contracts import SPECIAL_IDS, Batch, Params, SpecialIds
from seqjax.objectives.rollout import choose_per_row, rollout
from seqjax.objectives.sequences import bleu_rewards, candidate_log_probs, lengths_after, repeat_rows, valid_rows
from seqjax.objectives.teacher_forcing import teacher_forcing

BASELINES = ("self_critical", "mean", "none")


def check_reinforce(*, samples: int, baseline: str, mle_weight: float) -> None:
    check_int("samples", samples, 1)
    check_one_of("baseline", baseline, BASELINES)
    if baseline == "mean" and samples < 2:
        raise ValueError(f"samples must be >= 2 for the mean-of-the-others baseline, got {samples}")
    check_number("mle_weight", mle_weight, 0.0, 1.0)


def check_mixer(
    *, samples: int, baseline: str, mle_weight: float, delta_start: int, delta_growth: int, delta_every: int
) -> None:
    check_reinforce(samples=samples, baseline=baseline, mle_weight=mle_weight)
    check_int("delta_start", delta_start, 1)
    check_int("delta_growth", delta_growth, 0)
    check_int("delta_every", delta_every, 1)


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
    model: nn.Module, head: nn.Module, params: Params, batch: Batch, prefix: jax.Array, key: jax.Array,
    greedy: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Each row's gold targets before `prefix` [N] int32, then the model's own tokens, drawn
    (or the most probable where `greedy` [N] bool), without gradients.

    Returns tokens [N, T] int32 and lengths [N] int32 (to the first EOS at or after the prefix).
    """
    positions = jnp.arange(batch["inputs"].shape[1])
    gold = positions[None, :] <= prefix[:, None]
    _, _, chosen = rollout(model, head, jax.lax.stop_gradient(params), batch, gold, key, choose_per_row(greedy))
    tokens = jnp.where(positions[None, :] < prefix[:, None], batch["targets"], chosen)
    return tokens, lengths_after(tokens, prefix)


def prefix_reinforce_loss(
    model: nn.Module,
    head: nn.Module,
    params: Params,
    batch: Batch,
    key: jax.Array,
    prefix: jax.Array,
    *,
    samples: int,
    baseline: str,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Cross-entropy on each row's first `prefix` [B] int32 targets, REINFORCE after them.

    The K samples of every row and, for the self-critical baseline, its greedy sequence are
    rolled out together (rows B·K + B) and rewarded by one BLEU computation.

    Returns the loss [] float32 (per-sequence sums averaged over sequences) and metrics
    "reward", "baseline" (means over real rows) and "sample_length".
    """
    check_reinforce(samples=samples, baseline=baseline, mle_weight=0.0)
    rows = batch["inputs"].shape[0]
    drawn = rows * samples
    repeated, repeated_prefix = repeat_rows(batch, samples), jnp.repeat(prefix, samples)
    rollout_rows, rollout_prefix = repeated, repeated_prefix
    if baseline == "self_critical":
        rollout_rows = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), repeated, batch)
        rollout_prefix = jnp.concatenate([repeated_prefix, prefix])
    greedy = jnp.arange(rollout_prefix.shape[0]) >= drawn
    tokens, lengths = continue_after_prefix(model, head, params, rollout_rows, rollout_prefix, key, greedy)
    all_rewards = bleu_rewards(tokens, lengths, rollout_rows)
    rewards = all_rewards[:drawn].reshape(rows, samples)
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
    sequence_log_probs = jnp.sum(jnp.where(sampled, log_probs, 0.0), axis=1).reshape(rows, samples)
    prefix_log_probs = jnp.sum(jnp.where(gold, log_probs, 0.0), axis=1).reshape(rows, samples)
    cross_entropy = -jnp.sum(weights[:, None] * prefix_log_probs) / jnp.maximum(weights.sum() * samples, 1.0)
    loss = cross_entropy + reinforce_surrogate(sequence_log_probs, rewards, baselines, weights)

    def row_mean(x):
        return jnp.sum(weights[:, None] * x) / jnp.maximum(weights.sum() * x.shape[1], 1.0)

    lengths = lengths.reshape(rows, samples).astype(jnp.float32)
    metrics = {"reward": row_mean(rewards), "baseline": row_mean(baselines), "sample_length": row_mean(lengths)}
    return loss, metrics


def mix_with_mle(model, head, params, batch, key, step, loss, metrics, mle_weight):
    """w·teacher forcing + (1 − w)·loss for w = mle_weight (no teacher-forced pass when w = 0),
    with the batch's target tokens added to the metrics."""
    metrics = dict(metrics, tokens=batch["mask"].sum())
    if mle_weight == 0.0:
        return loss, metrics
    mle_loss, _ = teacher_forcing(model, head, params, batch, key, step, ids=SPECIAL_IDS)
    return mle_weight * mle_loss + (1.0 - mle_weight) * loss, dict(metrics, mle_loss=mle_loss)


def reinforce(
    model: nn.Module,
    head: nn.Module,
    params: Params,
    batch: Batch,
    key: jax.Array,
    step: jax.Array,
    *,
    ids: SpecialIds,
    samples: int = 4,
    baseline: str = "self_critical",
    mle_weight: float = 0.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """REINFORCE on K = `samples` sequences per row, sentence-BLEU reward, `baseline`.

    Returns:
      loss: [] float32, w·teacher forcing + (1 − w)·surrogate (w = mle_weight).
      metrics: "reward", "baseline", "sample_length", "tokens" (and "mle_loss" if w > 0).
    """
    check_reinforce(samples=samples, baseline=baseline, mle_weight=mle_weight)
    rl_key, mle_key = jax.random.split(key)
    prefix = jnp.zeros(batch["inputs"].shape[:1], jnp.int32)
    loss, metrics = prefix_reinforce_loss(
        model, head, params, batch, rl_key, prefix, samples=samples, baseline=baseline
    )
    return mix_with_mle(model, head, params, batch, mle_key, step, loss, metrics, mle_weight)


def mixer(
    model: nn.Module,
    head: nn.Module,
    params: Params,
    batch: Batch,
    key: jax.Array,
    step: jax.Array,
    *,
    ids: SpecialIds,
    samples: int = 4,
    baseline: str = "self_critical",
    mle_weight: float = 0.0,
    delta_start: int = 2,
    delta_growth: int = 2,
    delta_every: int = 1000,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """MIXER: cross-entropy on the first L − Δ targets of each row, REINFORCE on the last Δ.

    Returns:
      loss: [] float32, as `reinforce`.
      metrics: those of `reinforce` and "delta" (Δ at this step).
    """
    check_mixer(
        samples=samples, baseline=baseline, mle_weight=mle_weight,
        delta_start=delta_start, delta_growth=delta_growth, delta_every=delta_every,
    )
    rl_key, mle_key = jax.random.split(key)
    delta = mixer_delta(step, delta_start=delta_start, delta_growth=delta_growth, delta_every=delta_every)
    lengths = batch["mask"].sum(axis=1).astype(jnp.int32)
    prefix = jnp.maximum(lengths - delta, 0)
    loss, metrics = prefix_reinforce_loss(
        model, head, params, batch, rl_key, prefix, samples=samples, baseline=baseline
    )
    metrics = dict(metrics, delta=delta.astype(jnp.float32))
    return mix_with_mle(model, head, params, batch, mle_key, step, loss, metrics, mle_weight)
