"""The encoder-only Transformer for masked-LM pre-training (BERT's encoder), and the encoder stack
ELECTRA's pair (`electra.py`) is made of.

It reads tokens [B, T] over the vocabulary plus one input id, [MASK] = V
(`SpecialIds.mask_id(V)`), through the Transformer's blocks and stack (`models.transformer`)
under a bidirectional self-attention mask (padding, and segments when packed). It predicts only
vocabulary words, so the output head and `target_embedding` cover ids [0, V); the [MASK] row is
an input embedding only.

`TransformerEncoder` (model.kind=transformer_encoder) gives the hidden states [B, T, D] that
the head scores at masked positions (`seqjax.objectives.MaskedLM`). It does not decode
autoregressively: it has no decode step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.config import MODELS
from seqjax.models.attention_kernels.choice import KernelChoice
from seqjax.models.base import PackedTokenModel, token_embedding
from seqjax.models.transformer.blocks import make_norm
from seqjax.models.transformer.masks import self_mask
from seqjax.models.transformer.positions import PositionalInputs
from seqjax.models.transformer.stack import make_blocks, run_blocks


class EncoderStack(nn.Module):
    """Positions, the blocks of `cfg` (non-causal) and the final norm: [B, T, D] embedded
    inputs -> [B, T, D] float32."""

    cfg: Any
    dtype: Any = jnp.float32
    kernel_choice: KernelChoice = dataclasses.field(kw_only=True)  # self-attention's kernel (`build_model`)

    def setup(self) -> None:
        self.inputs = PositionalInputs(self.cfg)
        self.blocks = make_blocks(self.cfg, self.dtype, self.kernel_choice.kernel)
        if self.cfg.norm == "pre":
            self.final_norm = make_norm(self.cfg, self.dtype)

    def __call__(
        self, embedded: Array, mask: Array | None, positions: Array, segment_ids: Array | None, train: bool
    ) -> Array:
        x = self.inputs(embedded, positions, train)
        bound = self.kernel_choice.max_segments
        attention_mask = self_mask(causal=False, valid=mask, segments=segment_ids, max_segments=bound)
        x = run_blocks(self.blocks, self.cfg, x, positions, attention_mask, train=train)
        if self.cfg.norm == "pre":
            x = self.final_norm(x)
        return x.astype(jnp.float32)


class TransformerEncoder(PackedTokenModel):
    """Bidirectional Transformer encoder: tokens [B, T] (ids < V + 1) -> hidden [B, T, D]."""

    objective: ClassVar[str] = "masked_lm"  # the objective that trains it
    generates: ClassVar[bool] = False  # no autoregressive decode step
    # Its encoder's parts (`seqjax.contracts.Model`), which start an encoder-decoder's.
    encoder_parts: ClassVar[dict[str, str]] = {
        "blocks": "encoder/blocks",
        "norm": "encoder/final_norm",
        "inputs": "encoder/inputs",
        "embedding": "embed/embedding",
    }
    dtype: Any = jnp.float32
    kernel_choice: KernelChoice = dataclasses.field(kw_only=True)  # self-attention's kernel (`build_model`)

    def setup(self) -> None:
        # One more row than the vocabulary: [MASK] = V, an input only.
        self.token_embed = token_embedding(self.vocab_size + 1, self.cfg.d_model, "embed")
        self.encoder = EncoderStack(self.cfg, self.dtype, kernel_choice=self.kernel_choice)

    def target_embedding(self) -> Array:
        """The vocabulary's rows [V, D] float32 of the input table (a tied head scores words, never [MASK])."""
        result: Array = self.token_embed.embedding[: self.vocab_size]
        return result

    def packed_hidden_states(
        self, x: Array, mask: Array | None, positions: Array, segment_ids: Array | None, train: bool
    ) -> Array:
        """x: [B, T, D] float32, the lookup of tokens [B, T] int32 (ids in [0, V], V = [MASK]);
        mask: [B, T] bool or None (keys attended); positions: [B, T] or [T] int32; segment_ids:
        [B, T] int32 or None. Returns hidden: [B, T, D] float32, every row having seen every
        valid token."""
        return self.encoder(x, mask, positions, segment_ids, train)


MODELS.register("transformer_encoder", TransformerEncoder, families=("neural", "attention", "encoder_only"))
