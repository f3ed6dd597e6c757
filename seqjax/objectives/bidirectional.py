"""Joint training of ELMo's forward and backward language models (model.kind=bilm).

A row of an LM batch is the stream's tokens w_0 … w_T as inputs = w_0 … w_{T−1} and targets =
w_1 … w_T. The forward LM reads the inputs and predicts the targets: position t predicts w_{t+1}
from w_0 … w_t, so even position 0 has read one real token, w_0. The backward LM is its mirror
image on the same row: it reads the targets from the end and predicts the inputs, position t
predicting w_t from w_{t+1} … w_T, so its last position has read one real token, w_T. Each
direction scores T tokens of the row, every one given only real context in its own direction,
and no position reads a boundary that the stream does not hold. On a split scored whole
(`lm_eval_batches`: inputs `</s>` w_0 … w_{n−2}, targets w_0 … w_{n−1}) the forward LM scores
w_0 … w_{n−1} after the `</s>` before the split and the backward LM scores `</s>` w_0 … w_{n−2}
before the split's last token, the `</s>` ending its last line: both score n tokens, the same
multiset of them when the split ends a line, each direction's exact log-likelihood of the split
read its own way. Both directions' hidden states go to the same head; the loss is the mean of the
two directions' losses (Peters et al. 2018 maximize the sum of the two log-likelihoods).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import numpy as np

from seqjax.config import OBJECTIVES, Options
from seqjax.contracts import Batch, BidirectionalModel, EvalSums, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import head_loss, hidden_states, token_nll


def backward_batch(batch: Batch) -> Batch:
    """The batch as the backward LM sees it: it reads the targets [B, T] int32 (from the end) and
    predicts the inputs [B, T] int32 at the same positions under the same mask [B, T] float32."""
    return dict(batch, inputs=batch["targets"], targets=batch["inputs"])


def backward_hidden(model: Model, params: Params, batch: Batch, key: jax.Array, *, train: bool) -> jax.Array:
    """The backward LM's hidden states [B, T, D] float32: row t has read targets[t:] (masked
    steps at a row's end skipped) and predicts inputs[t]."""
    result: jax.Array = model.apply(
        {"params": params["model"]},
        batch["targets"],
        mask=batch["mask"] > 0,
        train=train,
        rngs={"dropout": key},
        method="backward",
    )
    return result


def direction_nlls(model: Model, head: Head, params: Params, batch: Batch) -> dict[str, jax.Array]:
    """Exact sums over the unmasked positions, [] float32 each: "forward" NLL of the targets,
    "backward" NLL of the inputs (the head's exact log-probabilities, no dropout) and "tokens",
    the positions each direction scores."""
    key = jax.random.key(0)
    mask = batch["mask"]
    forward = token_nll(model, head, params, hidden_states(model, params, batch, key, train=False), batch["targets"])
    hidden = backward_hidden(model, params, batch, key, train=False)
    backward = token_nll(model, head, params, hidden, backward_batch(batch)["targets"])
    return {"forward": (forward * mask).sum(), "backward": (backward * mask).sum(), "tokens": mask.sum()}


@dataclasses.dataclass(frozen=True)
class BidirectionalLMOptions(Options):
    """The joint forward + backward LM objective has no options."""


@dataclasses.dataclass(frozen=True)
class BidirectionalLM(BidirectionalLMOptions, Objective):
    """ELMo's joint objective: (forward LM loss + backward LM loss) / 2, each the head's
    masked mean over the row's positions. It has no options and does not change over training."""

    model_contract: ClassVar[type | None] = BidirectionalModel

    def eval_sums(
        self, model: Model, head: Head, params: Params, batch: Batch, key: jax.Array, *, ids: SpecialIds
    ) -> EvalSums:
        """The forward LM's exact NLL as any LM's, and the backward LM's beside it:
        (Σ forward NLL, scored positions, {"backward_nll": Σ backward NLL})."""
        del key, ids
        nlls = direction_nlls(model, head, params, batch)
        return nlls["forward"], nlls["tokens"], {"backward_nll": nlls["backward"]}

    @staticmethod
    def eval_report(nll: float, tokens: float, sums: Mapping[str, Any]) -> dict[str, float]:
        """The backward LM's NLL per token and its perplexity, beside the forward LM's."""
        del nll
        backward = sums["backward_nll"] / max(tokens, 1.0)
        return {"backward_nll": backward, "backward_token_perplexity": float(np.exp(backward))}

    @staticmethod
    def describe_eval(result: Mapping[str, float]) -> str:
        return f"; backward LM per-token perplexity {result['backward_token_perplexity']:,.4g}"

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
        loss: [] float32, the mean of the two directions' head losses.
        metrics: dict of [] float32: the forward head's aux, "forward_loss", "backward_loss".
        """
        del step, ids  # the objective does not change over training and reads no boundary
        forward_key, backward_key, forward_head_key, backward_head_key = jax.random.split(key, 4)
        forward = hidden_states(model, params, batch, forward_key, train=True)
        backward = backward_hidden(model, params, batch, backward_key, train=True)
        forward_loss, metrics = head_loss(model, head, params, forward, batch, forward_head_key)
        backward_loss, _ = head_loss(model, head, params, backward, backward_batch(batch), backward_head_key)
        return 0.5 * (forward_loss + backward_loss), dict(
            metrics, forward_loss=forward_loss, backward_loss=backward_loss
        )


OBJECTIVES.register("bidirectional_lm", BidirectionalLM, options=BidirectionalLMOptions)
