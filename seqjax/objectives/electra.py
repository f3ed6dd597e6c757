"""ELECTRA's replaced-token detection (Clark et al. 2020) for model.kind=electra.

A small generator is trained as a masked LM (the selected positions shown as [MASK]); its
samples at those positions replace the originals, and the discriminator classifies every
valid position of the result as replaced or original. A sample equal to the original token
counts as original. The generator and the discriminator share the token embedding; the loss
is generator MLM loss + λ · discriminator loss (λ = 50 in the paper), the discrete samples
passing no gradient back to the generator.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax

from seqjax.contracts import Batch, EvalSums, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import head_loss, token_log_probs
from seqjax.objective_config import ElectraOptions
from seqjax.objectives.masked_lm import encoded, mask_tokens, masked_nll


def replaced_labels(corrupted: jax.Array, original: jax.Array, valid: jax.Array) -> jax.Array:
    """The discriminator's targets: [B, T] float32, 1 where a valid token differs from the
    original (corrupted, original [B, T] int32; valid [B, T] bool)."""
    return ((corrupted != original) & valid).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class Electra(ElectraOptions, Objective):
    """ELECTRA: generator MLM loss + discriminator_weight · the mean over valid positions of
    the discriminator's binary cross-entropy. The options do not change over training."""

    def eval_sums(
        self, model: Model, head: Head, params: Params, batch: Batch, key: jax.Array, *, ids: SpecialIds
    ) -> EvalSums:
        """The generator scored as a masked LM (`masked_nll` through its `generator`), as
        `MaskedLM.eval_sums`."""
        sums = masked_nll(model, head, params, batch, key, ids=ids, method="generator")
        return sums["nll"], sums["masked"], {"positions": sums["positions"]}

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
        mask_key, sample_key, generator_key, discriminator_key, head_key = jax.random.split(key, 5)
        original, valid = batch["targets"], batch["mask"] > 0
        masked, selected = mask_tokens(
            original,
            valid,
            mask_key,
            ids=ids,
            vocab_size=model.vocab_size,
            rate=self.rate,
            mask_prob=1.0,
            random_prob=0.0,
        )
        hidden = encoded(model, params, masked, valid, generator_key, train=True, method="generator")
        generator_loss, metrics = head_loss(
            model, head, params, hidden, dict(batch, mask=selected.astype(jnp.float32)), head_key
        )
        log_probs = token_log_probs(model, head, jax.lax.stop_gradient(params), jax.lax.stop_gradient(hidden))
        samples = jax.random.categorical(sample_key, log_probs / self.temperature)
        corrupted = jnp.where(selected, samples, original)
        labels = replaced_labels(corrupted, original, valid)
        logits = model.apply(
            {"params": params["model"]},
            corrupted,
            mask=valid,
            train=True,
            rngs={"dropout": discriminator_key},
            method="discriminate",
        )
        weights = valid.astype(jnp.float32)
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
