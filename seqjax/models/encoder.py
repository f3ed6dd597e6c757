"""Encoder-only Transformers for masked-LM pre-training: BERT's encoder and ELECTRA's pair.

Both read tokens [B, T] over the vocabulary plus one input id, [MASK] = V
(`SpecialIds.mask_id(V)`), through the Transformer blocks of `blocks.py`/`stack.py` under a
bidirectional self-attention mask (padding, and segments when packed). They predict only
vocabulary words, so the output head and `target_embedding` cover ids [0, V); the [MASK]
row is an input embedding only.

`TransformerEncoder` (model.kind=transformer_encoder) gives the hidden states [B, T, D] that
the head scores at masked positions (`seqjax.objectives.MaskedLM`). `ElectraEncoder`
(model.kind=electra) is the discriminator, whose `__call__` is the encoder a fine-tuning
run would reuse, plus a small generator (`model.generator_layers` blocks, the same width,
sharing the token embedding) and the replaced-token classifier `discriminate`
(`seqjax.objectives.Electra`). Neither decodes autoregressively: they have no decode step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp

from seqjax.models.blocks import make_norm
from seqjax.models.checks import check_packing
from seqjax.models.embeddings import PositionalInputs, TokenModel, token_embedding
from seqjax.models.masks import self_mask
from seqjax.models.stack import make_blocks, run_blocks


class EncoderStack(nn.Module):
    """Positions, the blocks of `cfg` (non-causal) and the final norm: [B, T, D] embedded
    inputs -> [B, T, D] float32."""

    cfg: Any
    dtype: Any = jnp.float32

    def setup(self):
        self.inputs = PositionalInputs(self.cfg)
        self.blocks = make_blocks(self.cfg, self.dtype)
        if self.cfg.norm == "pre":
            self.final_norm = make_norm(self.cfg, self.dtype)

    def __call__(self, embedded, mask, positions, segment_ids, train: bool):
        x = self.inputs(embedded, positions, train)
        attention_mask = self_mask(causal=False, valid=mask, segments=segment_ids)
        x = run_blocks(self.blocks, self.cfg, x, positions, attention_mask, train=train)
        if self.cfg.norm == "pre":
            x = self.final_norm(x)
        return x.astype(jnp.float32)


class TransformerEncoder(TokenModel):
    """Bidirectional Transformer encoder: tokens [B, T] (ids < V + 1) -> hidden [B, T, D]."""

    objective: ClassVar[str] = "masked_lm"  # the objective that trains it
    generates: ClassVar[bool] = False  # no autoregressive decode step
    dtype: Any = jnp.float32

    def setup(self):
        # One more row than the vocabulary: [MASK] = V, an input only.
        self.token_embed = token_embedding(self.vocab_size + 1, self.cfg.d_model, "embed")
        self.encoder = EncoderStack(self.cfg, self.dtype)

    def target_embedding(self):
        """The vocabulary's rows [V, D] float32 of the input table (a tied head scores words, never [MASK])."""
        return self.token_embed.embedding[: self.vocab_size]

    def _encode(self, stack, tokens, mask, embedded, train, segment_ids, positions):
        embedded = self.embedded_targets(tokens, mask, embedded, self.cfg.max_len)
        check_packing(segment_ids, positions, tokens, self.cfg.max_len)
        if positions is None:
            positions = jnp.arange(tokens.shape[1], dtype=jnp.int32)
        return stack(embedded, mask, positions, segment_ids, train)

    def __call__(self, tokens, *, mask=None, embedded=None, train: bool = False, segment_ids=None, positions=None):
        """tokens: [B, T] int32 (ids in [0, V], V = [MASK]); mask: [B, T] bool or None (keys
        attended); embedded: [B, T, D] or None; segment_ids, positions: a packed row's, or
        None. Returns hidden: [B, T, D] float32, every row having seen every valid token."""
        return self._encode(self.encoder, tokens, mask, embedded, train, segment_ids, positions)


class ElectraEncoder(TransformerEncoder):
    """ELECTRA (Clark et al. 2020): the discriminator encoder (`__call__`, cfg.layers blocks)
    and a generator of `cfg.generator_layers` blocks over the same token embedding."""

    objective: ClassVar[str] = "electra"

    def setup(self):
        super().setup()
        self.generator_stack = EncoderStack(dataclasses.replace(self.cfg, layers=self.cfg.generator_layers), self.dtype)
        self.classifier = nn.Dense(1, dtype=self.dtype, name="classifier")

    def __call__(self, tokens, *, mask=None, embedded=None, train: bool = False, segment_ids=None, positions=None):
        """The discriminator's hidden states [B, T, D] float32 (as `TransformerEncoder`)."""
        if self.is_initializing():  # one init creates the generator and the classifier too
            self.generator(tokens, mask=mask)
            self.discriminate(tokens, mask=mask)
        return super().__call__(
            tokens, mask=mask, embedded=embedded, train=train, segment_ids=segment_ids, positions=positions
        )

    def generator(self, tokens, *, mask=None, train: bool = False):
        """The generator's hidden states [B, T, D] float32 for tokens [B, T] int32 (the head
        turns them into its masked-LM distribution)."""
        return self._encode(self.generator_stack, tokens, mask, None, train, None, None)

    def discriminate(self, tokens, *, mask=None, train: bool = False):
        """Replaced-token logits [B, T] float32: log-odds that each token is not the original."""
        hidden = super().__call__(tokens, mask=mask, train=train)
        return self.classifier(hidden).astype(jnp.float32)[..., 0]
