"""ELECTRA's replaced-token detection (Clark et al. 2020) for model.kind=electra.

A small generator is trained as a masked LM (the selected positions shown as [MASK]); its
samples at those positions replace the originals, and the discriminator classifies every
valid position of the result as replaced or original. A sample equal to the original token
counts as original. The generator and the discriminator share the token embedding; the loss
is generator MLM loss + λ · discriminator loss (λ = 50 in the paper), the discrete samples
passing no gradient back to the generator. Evaluation scores the generator as a masked LM and
the discriminator as a detector of replaced tokens (`seqjax.metrics.detection`: accuracy,
precision, recall, AUC and the base rate) on rows corrupted as in training at BERT's 15%.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import optax

from seqjax.checks import number
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, EvalSums, Head, Model, Objective, Params, ReplacedTokenModel, SpecialIds
from seqjax.metrics.detection import detection_report, detection_sums
from seqjax.model_head import head_loss, token_log_probs
from seqjax.objectives.masked_lm import EVAL_MASKING, EVAL_RATE, encoded, mask_tokens, masked_nll, masked_report

DETECTION = "discriminator_"  # the prefix of the discriminator's eval sums and of its reported metrics


def replaced_labels(corrupted: jax.Array, original: jax.Array, valid: jax.Array) -> jax.Array:
    """The discriminator's targets: [B, T] float32, 1 where a valid token differs from the
    original (corrupted, original [B, T] int32; valid [B, T] bool)."""
    return ((corrupted != original) & valid).astype(jnp.float32)


def replace_tokens(
    model: Model,
    head: Head,
    params: Params,
    original: jax.Array,
    valid: jax.Array,
    key: jax.Array,
    *,
    ids: SpecialIds,
    rate: float,
    temperature: float,
    train: bool,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The generator's corruption of original [B, T] int32 at valid [B, T] bool positions: a
    `rate` of them shown as [MASK] and replaced by a sample of the generator's distribution at
    `temperature` (through which no gradient passes).

    Returns hidden [B, T, D] float32 (the generator's), selected [B, T] bool, corrupted [B, T] int32.
    """
    mask_key, sample_key, generator_key = jax.random.split(key, 3)
    masking = dataclasses.replace(EVAL_MASKING, rate=rate)  # every selected token shown as [MASK]
    masked, selected = mask_tokens(original, valid, mask_key, masking, ids=ids, vocab_size=model.vocab_size)
    hidden = encoded(model, params, masked, valid, generator_key, train=train, method="generator")
    log_probs = token_log_probs(model, head, jax.lax.stop_gradient(params), jax.lax.stop_gradient(hidden))
    samples = jax.random.categorical(sample_key, log_probs / temperature)
    return hidden, selected, jnp.where(selected, samples, original)


def discriminator_logits(
    model: Model, params: Params, corrupted: jax.Array, valid: jax.Array, key: jax.Array, *, train: bool
) -> jax.Array:
    """Replaced-token logits [B, T] float32 for corrupted [B, T] int32 with valid [B, T] bool keys."""
    result: jax.Array = model.apply(
        {"params": params["model"]}, corrupted, mask=valid, train=train, rngs={"dropout": key}, method="discriminate"
    )
    return result


@dataclasses.dataclass(frozen=True)
class ElectraOptions(Options):
    """ELECTRA's masking rate, discriminator weight and sampling temperature."""

    rate: float = option(
        0.15, "probability that a valid token is masked for the generator", check=number(0.0, 1.0, open_low=True)
    )
    discriminator_weight: float = option(50.0, "λ, the weight of the replaced-token detection loss", check=number(0.0))
    temperature: float = option(1.0, "temperature of the generator's samples", check=number(0.0, open_low=True))


@dataclasses.dataclass(frozen=True)
class Electra(ElectraOptions, Objective):
    """ELECTRA: generator MLM loss + discriminator_weight · the mean over valid positions of
    the discriminator's binary cross-entropy. The options do not change over training."""

    scores_every_target: ClassVar[bool] = False
    model_contract: ClassVar[type | None] = ReplacedTokenModel

    def eval_sums(
        self, model: Model, head: Head, params: Params, batch: Batch, key: jax.Array, *, ids: SpecialIds
    ) -> EvalSums:
        """The generator scored as a masked LM (`masked_nll` through its `generator`), as
        `MaskedLM.eval_sums`, and the discriminator's `detection_sums` (prefixed DETECTION) on
        rows the generator corrupted at EVAL_RATE, sampling at temperature 1."""
        sums = masked_nll(model, head, params, batch, key, ids=ids, method="generator")
        _, _, logits, labels, weights = self._detect(
            model, head, params, batch, jax.random.fold_in(key, 1), key, ids=ids, train=False
        )
        detection = detection_sums(logits, labels, weights)
        return (
            sums["nll"],
            sums["masked"],
            {"positions": sums["positions"]} | {DETECTION + name: value for name, value in detection.items()},
        )

    def _detect(
        self,
        model: Model,
        head: Head,
        params: Params,
        batch: Batch,
        corrupt_key: jax.Array,
        discriminator_key: jax.Array,
        *,
        ids: SpecialIds,
        train: bool,
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
        """The generator's corruption of the batch's targets (`replace_tokens`: in training at
        the options' rate and temperature, else at EVAL_RATE and temperature 1) and the
        discriminator's judgement of it.

        Returns the generator's hidden [B, T, D] float32, selected [B, T] bool, the
        discriminator's logits [B, T] float32, its labels (`replaced_labels`) and weights (the
        valid positions), both [B, T] float32.
        """
        original, valid = batch["targets"], batch["mask"] > 0
        rate, temperature = (self.rate, self.temperature) if train else (EVAL_RATE, 1.0)
        hidden, selected, corrupted = replace_tokens(
            model, head, params, original, valid, corrupt_key, ids=ids, rate=rate, temperature=temperature, train=train
        )
        logits = discriminator_logits(model, params, corrupted, valid, discriminator_key, train=train)
        return hidden, selected, logits, replaced_labels(corrupted, original, valid), valid.astype(jnp.float32)

    @staticmethod
    def eval_report(nll: float, tokens: float, sums: Mapping[str, Any]) -> dict[str, float]:
        """The generator's `masked_report` and the discriminator's `detection_report` from the
        eval sums of a split, each detection metric prefixed DETECTION."""
        detection = {name[len(DETECTION) :]: value for name, value in sums.items() if name.startswith(DETECTION)}
        report = {DETECTION + name: value for name, value in detection_report(detection).items()}
        return masked_report(tokens, sums) | report

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
        loss: [] float32, generator loss + λ · discriminator loss.
        metrics: dict of [] float32: the head's aux, "generator_loss", "discriminator_loss",
          "replaced" (fraction of valid positions whose token differs from the original) and
          "discriminator_accuracy".
        """
        del step
        corrupt_key, discriminator_key, head_key = jax.random.split(key, 3)
        hidden, selected, logits, labels, weights = self._detect(
            model, head, params, batch, corrupt_key, discriminator_key, ids=ids, train=True
        )
        generator_loss, metrics = head_loss(
            model, head, params, hidden, dict(batch, mask=selected.astype(jnp.float32)), head_key
        )
        count = jnp.maximum(weights.sum(), 1.0)
        discriminator_loss = (optax.sigmoid_binary_cross_entropy(logits, labels) * weights).sum() / count
        accuracy = (((logits > 0) == (labels > 0)) * weights).sum() / count
        return generator_loss + self.discriminator_weight * discriminator_loss, dict(
            metrics,
            generator_loss=generator_loss,
            discriminator_loss=discriminator_loss,
            replaced=(labels * weights).sum() / count,
            discriminator_accuracy=accuracy,
        )


OBJECTIVES.register("electra", Electra, options=ElectraOptions)
