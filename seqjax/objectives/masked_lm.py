"""BERT's masked-LM objective (Devlin et al. 2019) for an encoder (model.kind=transformer_encoder).

Each valid token of a row is selected with probability `rate` (15%); a selected token is
replaced by [MASK] with probability `mask_prob` (80%), by a word drawn uniformly from the
vocabulary without the specials with probability `random_prob` (10%), and kept otherwise
(10%). The encoder reads the corrupted row, every valid token attending to every other, and
the head is judged on the original tokens at the selected positions only. The rows are the
batch's targets (an LM batch's tokens); its inputs are not read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from seqjax.checks import check_number, number
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, EvalSums, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import head_loss, token_nll


@dataclasses.dataclass(frozen=True)
class MaskedLMOptions(Options):
    """BERT's masking rates."""

    rate: float = option(
        0.15, "probability that a valid token is selected (predicted)", check=number(0.0, 1.0, open_low=True)
    )
    mask_prob: float = option(0.8, "probability that a selected token is shown as [MASK]", check=number(0.0, 1.0))
    random_prob: float = option(0.1, "probability that a selected token is shown as a random word (else itself)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("random_prob", self.random_prob, 0.0, 1.0 - self.mask_prob)


EVAL_RATE = 0.15  # positions scored by the masked-token perplexity
EVAL_MASKING = MaskedLMOptions(rate=EVAL_RATE, mask_prob=1.0, random_prob=0.0)  # all shown as [MASK]


def mask_tokens(
    tokens: jax.Array,
    valid: jax.Array,
    key: jax.Array,
    masking: MaskedLMOptions,
    *,
    ids: SpecialIds,
    vocab_size: int,
) -> tuple[jax.Array, jax.Array]:
    """BERT's corruption of tokens [B, T] int32 at valid [B, T] bool positions, at the rates of
    `masking`.

    Returns:
      corrupted: [B, T] int32, a selected position holding [MASK] (`ids.mask_id(V)`), a word in
        [ids.count, V) or its own token (probabilities mask_prob, random_prob and the rest).
      selected: [B, T] bool, the positions the loss is taken at.
    """
    if vocab_size <= ids.count:
        raise ValueError(f"vocab_size must be > {ids.count} (the special tokens), got {vocab_size}")
    select_u, kind_u, word_u = jax.random.uniform(key, (3, *tokens.shape))
    selected = valid & (select_u < masking.rate)
    words = ids.count + jnp.minimum(
        jnp.floor(word_u * (vocab_size - ids.count)).astype(jnp.int32), vocab_size - ids.count - 1
    )
    replacement = jnp.where(
        kind_u < masking.mask_prob,
        ids.mask_id(vocab_size),
        jnp.where(kind_u < masking.mask_prob + masking.random_prob, words, tokens),
    )
    return jnp.where(selected, replacement, tokens), selected


def encoded(
    model: Model,
    params: Params,
    tokens: jax.Array,
    valid: jax.Array,
    key: jax.Array,
    *,
    train: bool,
    method: str = "__call__",
) -> jax.Array:
    """The encoder's (or, method="generator", ELECTRA's generator's) hidden states [B, T, D]
    float32 for tokens [B, T] int32 with valid [B, T] bool keys."""
    result: jax.Array = model.apply(
        {"params": params["model"]}, tokens, mask=valid, train=train, rngs={"dropout": key}, method=method
    )
    return result


def masked_nll(
    model: Model, head: Head, params: Params, batch: Batch, key: jax.Array, *, ids: SpecialIds, method: str = "__call__"
) -> dict[str, jax.Array]:
    """The exact masked-token NLL of a batch: EVAL_RATE of the valid targets, drawn from
    `key`, shown as [MASK] and scored with the head's exact log-probabilities (no dropout).

    Returns [] float32 sums: "nll" over the masked positions, "masked" (their count) and
    "positions" (every valid position).
    """
    valid = batch["mask"] > 0
    corrupted, selected = mask_tokens(batch["targets"], valid, key, EVAL_MASKING, ids=ids, vocab_size=model.vocab_size)
    hidden = encoded(model, params, corrupted, valid, key, train=False, method=method)
    nll = token_nll(model, head, params, hidden, batch["targets"])
    return {"nll": (nll * selected).sum(), "masked": selected.sum().astype(jnp.float32), "positions": valid.sum()}


def masked_report(tokens: float, sums: Mapping[str, Any]) -> dict[str, float]:
    """masked_fraction: the scored (masked) tokens of a split over its valid positions."""
    return {"masked_fraction": tokens / max(sums["positions"], 1.0)}


@dataclasses.dataclass(frozen=True)
class MaskedLM(MaskedLMOptions, Objective):
    """BERT's masked LM: the head's masked mean loss of the original tokens at the selected
    positions of the corrupted row. The rates do not change over training."""

    scores_every_target: ClassVar[bool] = False

    def eval_sums(
        self, model: Model, head: Head, params: Params, batch: Batch, key: jax.Array, *, ids: SpecialIds
    ) -> EvalSums:
        """The masked-token NLL (`masked_nll`): (Σ NLL at EVAL_RATE of the valid positions shown
        as [MASK], their count, {"positions": valid positions})."""
        sums = masked_nll(model, head, params, batch, key, ids=ids)
        return sums["nll"], sums["masked"], {"positions": sums["positions"]}

    @staticmethod
    def eval_report(nll: float, tokens: float, sums: Mapping[str, Any]) -> dict[str, float]:
        return masked_report(tokens, sums)

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
        loss: [] float32, the head's mean loss over the selected positions.
        metrics: dict of [] float32: the head's aux ("tokens" = selected positions), "selected"
          (their fraction of the valid positions).
        """
        del step  # the rates do not change over training
        mask_key, model_key, head_key = jax.random.split(key, 3)
        valid = batch["mask"] > 0
        corrupted, selected = mask_tokens(batch["targets"], valid, mask_key, self, ids=ids, vocab_size=model.vocab_size)
        hidden = encoded(model, params, corrupted, valid, model_key, train=True)
        loss, metrics = head_loss(model, head, params, hidden, dict(batch, mask=selected.astype(jnp.float32)), head_key)
        return loss, dict(metrics, selected=selected.sum() / jnp.maximum(valid.sum(), 1))


OBJECTIVES.register("masked_lm", MaskedLM, options=MaskedLMOptions)
