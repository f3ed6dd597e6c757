"""Scheduled sampling (Bengio et al. 2015) and its parallel n-pass variant for Transformers:
the objective `ScheduledSampling` and the pure functions that feed the model its own tokens."""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp

from seqjax.checks import integer
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import (
    embed_tokens,
    head_loss,
    hidden_states,
    token_log_probs,
)
from seqjax.objectives.rollout import Feed, choose, rollout
from seqjax.objectives.schedules import SCHEDULES, EpsilonSchedule, check_schedule, gold_probability

ParallelFeed = Literal[Feed, "soft"]  # the rollout's feeds, and the expected embedding
Mode = Literal["auto", "scan", "parallel"]


def resolve_mode(model: Model, mode: str, feed: str) -> str:
    """ "auto" is the scan for recurrent decoders fed tokens, the parallel passes otherwise."""
    if mode != "auto":
        return mode
    return "scan" if model.recurrent and feed != "soft" else "parallel"


def gold_coins(key: jax.Array, shape: tuple[int, ...], epsilon: jax.Array) -> jax.Array:
    """[B, T] bool: True (feed gold) with probability ε, always True at position 0 (the start)."""
    coins = jax.random.uniform(key, shape) < epsilon
    return coins.at[:, 0].set(True)


def scan_inputs(
    model: Model, head: Head, params: Params, batch: Batch, gold: jax.Array, key: jax.Array, *, feed: str
) -> tuple[jax.Array, jax.Array]:
    """Sequential scheduled sampling: (hidden [B, T, D] float32, fed tokens [B, T] int32)."""
    hidden, fed, _ = rollout(model, head, params, batch, gold, key, choose(feed))
    return hidden, fed


def _shift_right(x: jax.Array, first: jax.Array) -> jax.Array:
    """Position t gets x at t − 1 (the prediction made there); position 0 gets `first`."""
    return jnp.concatenate([first, x[:, :-1]], axis=1)


def parallel_inputs(
    model: Model,
    head: Head,
    params: Params,
    batch: Batch,
    gold: jax.Array,
    key: jax.Array,
    *,
    feed: str,
    passes: int,
    first_pass_grad: bool = False,
) -> tuple[jax.Array, jax.Array | None]:
    """n-pass scheduled sampling: (hidden [B, T, D] float32 of the last pass, fed tokens
    [B, T] int32, or None for `feed="soft"`, which feeds embeddings)."""
    inputs = batch["inputs"]
    keys = jax.random.split(key, 2 * passes)
    earlier = params if first_pass_grad else jax.lax.stop_gradient(params)
    gold_embedded = embed_tokens(model, params, inputs) if feed == "soft" else None
    fed: jax.Array | None = inputs
    embedded: jax.Array | None = None
    for index in range(passes - 1):
        hidden = hidden_states(model, earlier, batch, keys[2 * index], train=True, inputs=fed, embedded=embedded)
        log_probs = token_log_probs(model, head, earlier, hidden)
        if gold_embedded is not None:  # feed == "soft"
            table = embed_tokens(model, earlier, jnp.arange(log_probs.shape[-1])[None])[0]
            mixed = _shift_right(jnp.exp(log_probs) @ table, gold_embedded[:, :1])
            embedded = jnp.where(gold[..., None], gold_embedded, mixed)
            fed = None
        else:
            predicted = choose(feed)(log_probs, keys[2 * index + 1])
            fed = jnp.where(gold, inputs, _shift_right(predicted, inputs[:, :1]))
    final_inputs = inputs if fed is None else fed
    hidden = hidden_states(model, params, batch, keys[-1], train=True, inputs=final_inputs, embedded=embedded)
    return hidden, fed


@dataclasses.dataclass(frozen=True)
class ScheduledSamplingOptions(Options):
    """Scheduled sampling's schedule of ε and how the model's own tokens are fed."""

    schedule: EpsilonSchedule = option(
        "inverse_sigmoid", "decay of ε, the probability of feeding gold: " + " | ".join(SCHEDULES)
    )
    k: float = option(200.0, "linear: in (0, 1]; exponential: in (0, 1); inverse_sigmoid: >= 1")
    c: float = option(1e-4, "linear: decrease of ε per step")
    eps_min: float = option(0.0, "linear: floor of ε")
    feed: ParallelFeed = option(
        "argmax",
        "the model's own token: argmax | sample | soft (parallel mode: expected embedding)",
    )
    mode: Mode = option(
        "auto",
        "scan (over the decode step) | parallel (n passes) | auto: scan for RNNs fed tokens",
    )
    passes: int = option(2, "parallel: model passes, the last one gets the loss", check=integer(2))
    first_pass_grad: bool = option(False, "parallel with soft feed: backpropagate through the earlier passes")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_schedule(self.schedule, k=self.k, c=self.c, eps_min=self.eps_min)
        if self.feed == "soft" and self.mode == "scan":
            raise ValueError("feed must be argmax or sample for mode=scan (the decode step takes tokens), got 'soft'")
        if self.first_pass_grad and self.feed != "soft":
            raise ValueError(f"first_pass_grad needs feed=soft (tokens carry no gradient), got feed={self.feed!r}")


@dataclasses.dataclass(frozen=True)
class ScheduledSampling(ScheduledSamplingOptions, Objective):
    """Scheduled sampling (Bengio et al. 2015): feed the gold token with probability ε, else the
    model's own prediction, with ε = schedule(step) decaying over training (schedules.py):

        linear max(eps_min, k − c·step) | exponential k^step | inverse_sigmoid k / (k + e^(step/k)).

    Two implementations, both feeding each row and position independently:

    * `scan` (faithful, any model with the decode-step contract): one `lax.scan` over the
      decode step; the token fed at step t is the gold one or the model's choice at step t − 1
      given everything it was fed before. The decode step is the inference path (no dropout),
      and it is sequential, which suits recurrent decoders.
    * `parallel` (Duckworth et al. 2019; Mihaylova & Martins 2019), for Transformers: a
      teacher-forced pass predicts every position at once; positions that lost the coin flip
      take the prediction of the position before; `passes − 1` such prediction passes, then a
      last pass gets the loss. With passes = T the fed tokens equal the scan's (argmax feed).
      `feed="soft"` feeds the probability-weighted mix of embeddings instead of a token, the
      one case where a gradient can flow through the earlier passes (`first_pass_grad`).

    `mode="auto"` is the scan for recurrent models fed tokens, the parallel passes otherwise.
    The loss is the head's training loss on gold targets; the coin flips are the same in
    every pass.
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
        loss: [] float32, the head's masked mean loss on gold targets.
        metrics: dict of [] float32: the head's aux, "epsilon" (ε at this step) and
          "gold_fed" (the fraction of target positions after the first fed the gold token).
        """
        del ids  # only gold and predicted tokens are fed
        mode = resolve_mode(model, self.mode, self.feed)
        coin_key, feed_key, head_key = jax.random.split(key, 3)
        epsilon = gold_probability(self.schedule, step, k=self.k, c=self.c, eps_min=self.eps_min)
        gold = gold_coins(coin_key, batch["inputs"].shape, epsilon)
        if mode == "scan":
            hidden, _ = scan_inputs(model, head, params, batch, gold, feed_key, feed=self.feed)
        else:
            hidden, _ = parallel_inputs(
                model,
                head,
                params,
                batch,
                gold,
                feed_key,
                feed=self.feed,
                passes=self.passes,
                first_pass_grad=self.first_pass_grad,
            )
        loss, metrics = head_loss(model, head, params, hidden, batch, head_key)
        later = batch["mask"][:, 1:]
        gold_fed = (gold[:, 1:] * later).sum() / jnp.maximum(later.sum(), 1.0)
        return loss, dict(metrics, epsilon=epsilon, gold_fed=gold_fed)


OBJECTIVES.register("scheduled_sampling", ScheduledSampling, options=ScheduledSamplingOptions)
