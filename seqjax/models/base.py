"""What every neural model shares: the token embedding, the initializers of a dense layer with
its parameters' logical axes, and the base classes of the contract (`seqjax.contracts.Model`) —
`TokenModel` (language models), `EncoderDecoder` (those that also read a source) and
`PackedTokenModel` (those over positions, whose rows may be packed).

Every parameter names its logical axes where it is created (`nn.with_logical_partitioning`):
`init` returns them boxed, and the run's sharding strategy maps them onto the mesh
(`seqjax.training.core.layout`)."""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.config import ModelConfig
from seqjax.models.input_checks import check_embedded, check_mask, check_packing, check_source, check_tokens


def token_embedding(vocab_size: int, width: int, name: str) -> nn.Embed:
    """[V, D] table (vocab, embed) with N(0, 1/D) entries: rows of about unit norm, so an output
    head tied to it starts with O(1) logits; the Transformer rescales lookups by √D."""
    init = nn.with_logical_partitioning(nn.initializers.normal(width**-0.5), ("vocab", "embed"))
    return nn.Embed(vocab_size, width, embedding_init=init, name=name)


def dense_axes(kernel: tuple[str | None, ...], inputs: int = 1) -> dict[str, Any]:
    """`kernel_init` and `bias_init` (Flax's defaults) of an `nn.Dense` or `nn.DenseGeneral` whose
    kernel has the logical axes `kernel`, its first `inputs` contracted with the input; the bias
    has the others, the output's."""
    return {
        "kernel_init": nn.with_logical_partitioning(nn.linear.default_kernel_init, kernel),
        "bias_init": nn.with_logical_partitioning(nn.initializers.zeros_init(), kernel[inputs:]),
    }


class TokenModel(nn.Module):
    """What every neural model shares (`seqjax.contracts.Model`): its config, its target
    vocabulary, the target embedding table, which a subclass creates in `setup` as
    `self.token_embed = token_embedding(vocab_size, D, "embed")`, and the teacher-forced
    `__call__`, which checks its inputs and hands them to the subclass's `hidden_states`."""

    cfg: ModelConfig
    vocab_size: int
    has_encoder: ClassVar[bool] = False
    recurrent: ClassVar[bool] = False

    @classmethod
    def matmul_weights(cls, cfg: ModelConfig) -> int | None:
        """N: the weights a trained target token multiplies in the model, the head's apart (the
        FLOPs that MFU counts, `seqjax.training.core.mfu`); None for a model that does not count them."""
        return None

    @classmethod
    def attention_flops(cls, cfg: ModelConfig, seq_len: int) -> int:
        """Forward and backward FLOPs per target token of attention's scores and values over
        rows of seq_len tokens (12·L·D·T per attention of L layers)."""
        return 0

    def embed(self, tokens: Array) -> Array:
        """tokens: [B, T] int32 -> [B, T, D] float32, the (target) lookup `embedded` may replace."""
        result: Array = self.token_embed(tokens)
        return result

    def target_embedding(self) -> Array:
        """The target embedding table [V, D] float32 (what a tied head scores with)."""
        result: Array = self.token_embed.embedding
        return result

    def __call__(
        self, tokens: Array, *, mask: Array | None = None, embedded: Array | None = None, train: bool = False
    ) -> Array:
        """The teacher-forced pass: tokens [B, T] int32, mask [B, T] bool or None, embedded
        [B, T, D] or None (replaces the lookup of `tokens`). Returns `hidden_states`: [B, T, D] float32."""
        x = self.embedded_targets(tokens, mask, embedded)
        return self.hidden_states(tokens, x, mask, train)

    def hidden_states(self, tokens: Array, x: Array, mask: Array | None, train: bool) -> Array:
        """The model proper, given checked inputs: tokens [B, T] int32 as called, x [B, T, D]
        float32 their lookup (or the `embedded` that replaced it), mask [B, T] bool or None.
        Returns [B, T, D] float32."""
        raise NotImplementedError(f"{type(self).__name__} defines no hidden_states")

    def embedded_targets(
        self, tokens: Array, mask: Array | None, embedded: Array | None, max_len: int | None = None
    ) -> Array:
        """Checks a teacher-forced call's tokens [B, T] int32 (T <= max_len), mask [B, T] bool
        or None and embedded [B, T, D] or None; returns [B, T, D] float32, `embedded` when
        given, else the lookup of `tokens`."""
        check_tokens(tokens, max_len=max_len)
        check_mask(mask, tokens)
        check_embedded(embedded, tokens, self.cfg.d_model)
        return self.token_embed(tokens) if embedded is None else embedded.astype(jnp.float32)


class EncoderDecoder(TokenModel):
    """A TokenModel that also reads a source sequence over its own vocabulary; a subclass's
    `setup` calls `setup_embeddings()` for the source ("src_embed") and target ("embed")
    tables."""

    has_encoder: ClassVar[bool] = True
    src_vocab_size: int
    dtype: Any = jnp.float32

    def setup_embeddings(self) -> None:
        self.source_embed = token_embedding(self.src_vocab_size, self.cfg.d_model, "src_embed")
        self.token_embed = token_embedding(self.vocab_size, self.cfg.d_model, "embed")

    def __call__(
        self,
        tokens: Array,
        *,
        src: Array | None = None,
        src_mask: Array | None = None,
        mask: Array | None = None,
        embedded: Array | None = None,
        train: bool = False,
    ) -> Array:
        """The teacher-forced pass: tokens [B, T] int32; src [B, S] int32; src_mask [B, S] bool
        or None; mask [B, T] bool or None; embedded [B, T, D] or None (replaces the target
        lookup). Returns `decoder_hidden_states`: [B, T, D] float32."""
        x = self.embedded_targets(tokens, mask, embedded)
        src = check_source(src, src_mask, tokens.shape[0])
        return self.decoder_hidden_states(x, mask, src, src_mask, train)

    def decoder_hidden_states(
        self, x: Array, mask: Array | None, src: Array, src_mask: Array | None, train: bool
    ) -> Array:
        """The model proper, given checked inputs: x [B, T, D] float32 the target lookup (or the
        `embedded` that replaced it), mask [B, T] bool or None, src [B, S] int32, src_mask [B, S]
        bool or None. Returns [B, T, D] float32, row t predicting target token t + 1."""
        raise NotImplementedError(f"{type(self).__name__} defines no decoder_hidden_states")


class PackedTokenModel(TokenModel):
    """A TokenModel over positions (the Transformer LM and encoders): rows of at most
    cfg.max_len tokens, which a packed batch fills with several segments; its `__call__`
    also takes each token's segment and position and hands them to `packed_hidden_states`."""

    def __call__(
        self,
        tokens: Array,
        *,
        mask: Array | None = None,
        embedded: Array | None = None,
        train: bool = False,
        segment_ids: Array | None = None,
        positions: Array | None = None,
    ) -> Array:
        """`TokenModel.__call__` for T <= cfg.max_len, plus segment_ids: [B, T] int32 or None, a
        packed row's segment of each token (attention never crosses segments); positions: [B, T]
        int32 or None (0, 1, ..., T - 1), each token's position (within its segment when packed)."""
        x = self.embedded_targets(tokens, mask, embedded, self.cfg.max_len)
        check_packing(segment_ids, positions, tokens, self.cfg.max_len)
        if positions is None:
            positions = jnp.arange(tokens.shape[1], dtype=jnp.int32)
        return self.packed_hidden_states(x, mask, positions, segment_ids, train)

    def packed_hidden_states(
        self, x: Array, mask: Array | None, positions: Array, segment_ids: Array | None, train: bool
    ) -> Array:
        """The model proper, given checked inputs: x [B, T, D] float32 the lookup (or the
        `embedded` that replaced it), mask [B, T] bool or None, positions [B, T] or [T] int32,
        segment_ids [B, T] int32 or None. Returns [B, T, D] float32."""
        raise NotImplementedError(f"{type(self).__name__} defines no packed_hidden_states")
