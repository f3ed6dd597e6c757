"""The VAE language model's objective (Bowman et al. 2016): reconstruction NLL + β · KL.

For a row x with posterior q(z | x) = N(μ, diag σ²) and prior p(z) = N(0, I),
  −ELBO(x) = E_q[−log p(x | z)] + KL(q(z | x) ‖ p(z)) ≥ −log p(x),
so exp(−ELBO / tokens) bounds the perplexity from above. Training estimates the first
term with one reparameterized sample z = μ + σ · ε (the head's loss; any head), and takes
the KL in closed form. Against posterior collapse (KL → 0, the decoder ignoring z) it
offers KL annealing (β rising from 0 over `anneal_steps`, linear or sigmoid), word
dropout (decoder inputs replaced by <unk>, so the decoder must lean on z) and free bits
(Kingma et al. 2016: a latent dimension's batch-mean KL below λ nats is not pushed down).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp

from seqjax.checks import check_one_of, integer, number
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, EvalSums, Head, LatentModel, Model, Objective, Params, SpecialIds
from seqjax.model_head import head_loss, token_nll

KLSchedule = Literal["linear", "sigmoid", "constant"]  # the annealing of β
KL_SCHEDULES = typing.get_args(KLSchedule)


def gaussian_kl(mean: jax.Array, log_variance: jax.Array) -> jax.Array:
    """KL(N(μ, σ²) ‖ N(0, 1)) per dimension: ½ (σ² + μ² − 1 − log σ²).

    mean, log_variance: [..., Z] float32. Returns [..., Z] float32 (sum over Z for a
    diagonal Gaussian's KL).
    """
    return 0.5 * (jnp.exp(log_variance) + jnp.square(mean) - 1.0 - log_variance)


def reparameterize(mean: jax.Array, log_variance: jax.Array, key: jax.Array) -> jax.Array:
    """z = μ + σ · ε, ε ~ N(0, I) from `key`: a sample of q differentiable in μ and log σ².

    mean, log_variance: [..., Z] float32. Returns [..., Z] float32.
    """
    noise = jax.random.normal(key, mean.shape, jnp.float32)
    return mean + jnp.exp(0.5 * log_variance) * noise


def kl_weight(schedule: str, step: jax.Array, *, beta: float, anneal_steps: int, sharpness: float) -> jax.Array:
    """β at `step` (a Python int or a traced int32 scalar). Returns [] float32.

    linear: β · min(1, step / anneal_steps); sigmoid: β · (σ(k (s − ½)) − σ(−k/2)) /
    (σ(k/2) − σ(−k/2)) with s = min(1, step / anneal_steps) and k = sharpness, a logistic
    curve rescaled to be exactly 0 at step 0 and β from anneal_steps on (Bowman et al.'s
    shape); constant: β at every step.
    """
    check_one_of("schedule", schedule, KL_SCHEDULES)
    if schedule == "constant":
        result: jax.Array = jnp.float32(beta)
        return result
    progress = jnp.minimum(jnp.asarray(step, jnp.float32) / anneal_steps, 1.0)
    if schedule == "linear":
        return beta * progress
    low, high = jax.nn.sigmoid(-0.5 * sharpness), jax.nn.sigmoid(0.5 * sharpness)
    return beta * (jax.nn.sigmoid(sharpness * (progress - 0.5)) - low) / (high - low)


def drop_words(inputs: jax.Array, mask: jax.Array, key: jax.Array, *, rate: float, unk_id: int) -> jax.Array:
    """Decoder inputs with each valid position after the first (the first is the row's
    context token) replaced by `unk_id` with probability `rate` (Bowman et al.'s word dropout).

    inputs: [B, T] int32; mask: [B, T] float32. Returns [B, T] int32.
    """
    droppable = (mask > 0) & (jnp.arange(inputs.shape[1]) >= 1)
    dropped = droppable & (jax.random.uniform(key, inputs.shape) < rate)
    return jnp.where(dropped, unk_id, inputs)


def free_bits_kl(kl: jax.Array, rows: jax.Array, free_bits: float) -> jax.Array:
    """The KL the objective pays for a batch: rows · Σ_d max(λ, Σ_b KL_bd / rows) (λ =
    free_bits nats per dimension, the batch-mean KL of each dimension floored at λ).

    kl: [B, Z] float32 (zero on rows that hold no token); rows: [] float32, the rows that
    hold tokens. Returns [] float32; with λ = 0 it is Σ KL.
    """
    rows = jnp.maximum(rows, 1.0)
    return rows * jnp.maximum(free_bits, kl.sum(axis=0) / rows).sum()


def posterior(model: Model, params: Params, batch: Batch) -> tuple[jax.Array, jax.Array]:
    """q(z | x) of each row's targets (the sentence the decoder reconstructs), padding
    masked: (mean, log_variance), each [B, Z] float32."""
    result: tuple[jax.Array, jax.Array] = model.apply(
        {"params": params["model"]}, batch["targets"], batch["mask"] > 0, method="encode"
    )
    return result


def decoder_hidden(
    model: Model, params: Params, inputs: jax.Array, latent: jax.Array, key: jax.Array, *, train: bool
) -> jax.Array:
    """The decoder's teacher-forced hidden states [B, T, D] float32 given z = latent [B, Z]."""
    result: jax.Array = model.apply(
        {"params": params["model"]}, inputs, latent, train=train, rngs={"dropout": key}, method="decode"
    )
    return result


def _row_kl(mean: jax.Array, log_variance: jax.Array, batch: Batch) -> tuple[jax.Array, jax.Array]:
    """KL [B, Z] float32, zero on rows without tokens (the padding of an eval split), and the
    count of rows with tokens [] float32."""
    holds = batch["mask"].sum(axis=1) > 0
    return gaussian_kl(mean, log_variance) * holds[:, None], holds.sum().astype(jnp.float32)


def negative_elbo(model: Model, head: Head, params: Params, batch: Batch, key: jax.Array) -> dict[str, jax.Array]:
    """The batch's −ELBO from one sample z ~ q per row (drawn from `key`), with the head's
    exact log-probabilities and the closed-form KL; no dropout, no word dropout.

    Returns [] float32 sums: "nll" (reconstruction, Σ over unmasked targets of −log p(y_t |
    y_<t, z)), "kl" (Σ over rows), "tokens" (unmasked targets) and "rows" (rows with
    tokens). nll + kl ≥ −log p(x) summed over the batch.
    """
    mean, log_variance = posterior(model, params, batch)
    hidden = decoder_hidden(model, params, batch["inputs"], reparameterize(mean, log_variance, key), key, train=False)
    nll = token_nll(model, head, params, hidden, batch["targets"])
    kl, rows = _row_kl(mean, log_variance, batch)
    return {"nll": (nll * batch["mask"]).sum(), "kl": kl.sum(), "tokens": batch["mask"].sum(), "rows": rows}


def prior_reconstruction_nll(model: Model, head: Head, params: Params, batch: Batch, key: jax.Array) -> jax.Array:
    """Σ over unmasked targets of −log p(y_t | y_<t, z) with z ~ p(z) = N(0, I) (one draw per
    row from `key`) instead of q(z | x): [] float32. Less the posterior's reconstruction NLL, it
    measures how much the decoder uses what z holds of x (≈ 0 when it ignores z)."""
    mean, _ = posterior(model, params, batch)
    latent = jax.random.normal(key, mean.shape, jnp.float32)
    hidden = decoder_hidden(model, params, batch["inputs"], latent, key, train=False)
    return (token_nll(model, head, params, hidden, batch["targets"]) * batch["mask"]).sum()


@dataclasses.dataclass(frozen=True)
class VAEOptions(Options):
    """The VAE LM objective's KL weight, its annealing, word dropout and free bits."""

    beta: float = option(1.0, "the KL weight β reached at the end of annealing", check=number(0.0))
    schedule: KLSchedule = option(
        "linear",
        "KL annealing: linear | sigmoid (β from 0 at step 0) | constant (β throughout)",
    )
    anneal_steps: int = option(1000, "updates over which β rises from 0 to beta (linear, sigmoid)", check=integer())
    sharpness: float = option(
        10.0, "sigmoid: slope k of σ(k (step / anneal_steps − ½))", check=number(0.0, open_low=True)
    )
    word_dropout: float = option(
        0.0, "probability that a decoder input (after the first) is replaced by <unk>", check=number(0.0, 1.0)
    )
    free_bits: float = option(
        0.0, "λ nats per latent dimension: batch-mean KL below it is not penalized", check=number(0.0)
    )


@dataclasses.dataclass(frozen=True)
class VAE(VAEOptions, Objective):
    """The VAE LM objective (model.kind=rnn_vae): the head's reconstruction loss of the
    targets given z ~ q(z | targets) plus β · KL / tokens, so that at β = 1 without free bits
    the loss is the negative ELBO per target token."""

    model_contract: ClassVar[type | None] = LatentModel

    def weight(self, step: jax.Array) -> jax.Array:
        """β at `step`: [] float32."""
        return kl_weight(self.schedule, step, beta=self.beta, anneal_steps=self.anneal_steps, sharpness=self.sharpness)

    def eval_sums(
        self, model: Model, head: Head, params: Params, batch: Batch, key: jax.Array, *, ids: SpecialIds
    ) -> EvalSums:
        """The bound (`negative_elbo`, z drawn from `key`'s first half): Σ −ELBO (reconstruction
        NLL + KL), target tokens, and {"kl": Σ KL, "rows": rows with tokens, "prior_nll": Σ NLL
        given z from the prior (`prior_reconstruction_nll`, from the second half)}; the
        perplexities are upper bounds."""
        del ids
        posterior_key, prior_key = jax.random.split(key)
        terms = negative_elbo(model, head, params, batch, posterior_key)
        prior_nll = prior_reconstruction_nll(model, head, params, batch, prior_key)
        further = {"kl": terms["kl"], "rows": terms["rows"], "prior_nll": prior_nll}
        return terms["nll"] + terms["kl"], terms["tokens"], further

    @staticmethod
    def eval_report(nll: float, tokens: float, sums: Mapping[str, Any]) -> dict[str, float]:
        """From the split's Σ −ELBO (`nll`) and further sums: kl and elbo in nats per row,
        reconstruction_nll (z from the posterior) and prior_reconstruction_nll (z from the prior)
        per token, and reconstruction_gap, their difference in nats per row: the information in z
        that the decoder uses."""
        rows, tokens = max(sums["rows"], 1.0), max(tokens, 1.0)
        reconstruction = nll - sums["kl"]
        return {
            "kl": sums["kl"] / rows,
            "elbo": -nll / rows,
            "reconstruction_nll": reconstruction / tokens,
            "prior_reconstruction_nll": sums["prior_nll"] / tokens,
            "reconstruction_gap": (sums["prior_nll"] - reconstruction) / rows,
        }

    @staticmethod
    def describe_eval(result: Mapping[str, float]) -> str:
        line = f"; bounds from the ELBO {result['elbo']:.4g} nats per row, of which KL {result['kl']:.4g}"
        return line + f"; z from the prior costs the decoder {result['reconstruction_gap']:.4g} nats per row"

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
        loss: [] float32, reconstruction (the head's masked mean) + β · KL paid / tokens.
        metrics: dict of [] float32: the head's aux, "reconstruction", "kl" (exact, nats per
          row), "kl_weight" (β) and "negative_elbo" (reconstruction + KL / tokens).
        """
        latent_key, drop_key, model_key, head_key = jax.random.split(key, 4)
        mean, log_variance = posterior(model, params, batch)
        inputs = drop_words(batch["inputs"], batch["mask"], drop_key, rate=self.word_dropout, unk_id=ids.unk)
        hidden = decoder_hidden(
            model, params, inputs, reparameterize(mean, log_variance, latent_key), model_key, train=True
        )
        reconstruction, metrics = head_loss(model, head, params, hidden, batch, head_key)
        kl, rows = _row_kl(mean, log_variance, batch)
        tokens = jnp.maximum(batch["mask"].sum(), 1.0)
        beta = self.weight(step)
        loss = reconstruction + beta * free_bits_kl(kl, rows, self.free_bits) / tokens
        return loss, dict(
            metrics,
            reconstruction=reconstruction,
            kl=kl.sum() / jnp.maximum(rows, 1.0),
            kl_weight=beta,
            negative_elbo=reconstruction + kl.sum() / tokens,
        )


__all__ = [
    "VAE",
    "decoder_hidden",
    "drop_words",
    "free_bits_kl",
    "gaussian_kl",
    "kl_weight",
    "negative_elbo",
    "posterior",
    "prior_reconstruction_nll",
    "reparameterize",
]


OBJECTIVES.register("vae", VAE, options=VAEOptions)
