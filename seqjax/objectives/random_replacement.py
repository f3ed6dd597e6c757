"""Random replacement of decoder inputs (Su 2020): the objective `RandomReplacement` and the
draw of the noisy inputs, `replace_inputs`."""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp

from seqjax.checks import number
from seqjax.config import OBJECTIVES, Options, option
from seqjax.contracts import Batch, Head, Model, Objective, Params, SpecialIds
from seqjax.model_head import head_loss, hidden_states

Pool = Literal["target", "vocab"]  # where replacement tokens come from


def replace_inputs(
    batch: Batch,
    key: jax.Array,
    *,
    ids: SpecialIds,
    vocab_size: int,
    sequence_rate: float,
    token_rate: float,
    pool: str,
) -> tuple[jax.Array, jax.Array]:
    """Draws the noisy decoder inputs (the options as `RandomReplacement`'s).

    Args:
      batch: `inputs [B, T] int32` and `mask [B, T] float32`; a position is replaceable
        when t ≥ 1 and its mask is on.
      ids: the special ids, which pool "vocab" never draws (it draws ids in [ids.count, V)).
      vocab_size: V, for pool "vocab".

    Returns:
      inputs: [B, T] int32 with the replacements.
      replaced: [B, T] bool, the positions that were drawn anew (a draw may repeat the
        original token).
    """
    if pool == "vocab" and vocab_size <= ids.count:
        raise ValueError(f"vocab_size must be > {ids.count} (the special tokens) for pool=vocab, got {vocab_size}")
    inputs = batch["inputs"]
    rows, length = inputs.shape
    # One draw of uniforms for the row coin, the token coins and the replacement choice.
    row_u, token_u, draw_u = jax.random.uniform(key, (3, rows, length))
    eligible = (batch["mask"] > 0) & (jnp.arange(length) >= 1)
    replaced = eligible & (row_u[:, :1] < sequence_rate) & (token_u < token_rate)
    if pool == "target":
        # Uniform rank among the row's eligible positions, then the position holding that rank.
        rank = jnp.floor(draw_u * eligible.sum(axis=1, keepdims=True)).astype(jnp.int32)
        running = jnp.cumsum(eligible, axis=1)
        positions = jnp.argmax(running[:, None, :] > rank[:, :, None], axis=-1)
        # A row with no eligible position has nothing to replace; its draws are never used.
        draws = jnp.take_along_axis(inputs, positions, axis=1)
    else:
        others = vocab_size - ids.count
        offsets = jnp.minimum(jnp.floor(draw_u * others).astype(jnp.int32), others - 1)
        draws = ids.count + offsets
    return jnp.where(replaced, draws, inputs), replaced


@dataclasses.dataclass(frozen=True)
class RandomReplacementOptions(Options):
    """How often decoder inputs are replaced, and by what."""

    sequence_rate: float = option(0.5, "probability that a row gets replacements", check=number(0.0, 1.0))
    token_rate: float = option(
        0.3, "probability that a decoder input of a chosen row (after the first) is replaced", check=number(0.0, 1.0)
    )
    pool: Pool = option(
        "target",
        "replacement tokens: target (the row's own tokens) | vocab (uniform, no specials)",
    )


@dataclasses.dataclass(frozen=True)
class RandomReplacement(RandomReplacementOptions, Objective):
    """Random replacement of decoder inputs (Su 2020): teacher forcing on noisy prefixes.

    A row is chosen with probability `sequence_rate`; in a chosen row each decoder input after
    the first (the first is the start token) is replaced with probability `token_rate` by a
    token drawn uniformly from the pool: the row's own gold decoder inputs (pool "target"), or
    the vocabulary without the special tokens (pool "vocab"). The labels stay gold, so the
    model learns to predict the right next token after a prefix that contains mistakes. The
    rates do not change over training.
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
        loss: [] float32, the head's masked mean loss on gold labels after the noisy inputs.
        metrics: dict of [] float32: the head's aux and "replaced" (replaced / replaceable
          positions).
        """
        del step  # the rates do not change over training
        replace_key, model_key, head_key = jax.random.split(key, 3)
        inputs, replaced = replace_inputs(
            batch,
            replace_key,
            ids=ids,
            vocab_size=model.vocab_size,
            sequence_rate=self.sequence_rate,
            token_rate=self.token_rate,
            pool=self.pool,
        )
        hidden = hidden_states(model, params, batch, model_key, train=True, inputs=inputs)
        loss, metrics = head_loss(model, head, params, hidden, batch, head_key)
        replaceable = ((batch["mask"] > 0) & (jnp.arange(inputs.shape[1]) >= 1)).sum()
        return loss, dict(metrics, replaced=replaced.sum() / jnp.maximum(replaceable, 1.0))


OBJECTIVES.register("random_replacement", RandomReplacement, options=RandomReplacementOptions)
