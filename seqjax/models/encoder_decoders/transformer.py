"""Transformer encoder–decoder (Vaswani et al. 2017).

The encoder is bidirectional self-attention under the source padding mask; each decoder
block adds cross-attention over the encoder output. For decoding, every layer's
cross-attention keys and values are computed once, in `init_decode_state`, and carried in
the state next to the self-attention KV cache.

Packed rows give segment ids and per-segment positions on both sides (`src_segment_ids`,
`src_positions`, `segment_ids`, `positions`): a source token sees its own source segment, a
target token its own target prefix and the source segment with the same id.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax.numpy as jnp
from jax import Array

from seqjax.config import MODELS, ModelConfig
from seqjax.contracts import SharedByBeams
from seqjax.models.attention_kernels.choice import KernelChoice
from seqjax.models.base import EncoderDecoder
from seqjax.models.input_checks import check_decode_size, check_packing, check_source, check_tokens
from seqjax.models.transformer.blocks import block_matmul_weights, make_norm
from seqjax.models.transformer.masks import padding_mask, segment_mask, self_mask
from seqjax.models.transformer.positions import PositionalInputs
from seqjax.models.transformer.stack import block_memories, decode_blocks, empty_decode_cache, make_blocks, run_blocks


class TransformerSeq2Seq(EncoderDecoder):
    """(src [B, S], tokens [B, T]) → hidden [B, T, D]; row t predicts target token t+1.

    Decode state: {"cache", "slot_rows": the decoder stack's KV caches
    (`stack.empty_decode_cache`), "memory": its cross-attention memories
    (`stack.block_memories`, [.., K, S, Dh] keys and values), "src_mask": [B, S] bool,
    "positions": [B] int32}.
    """

    # Its encoder's parts (`seqjax.contracts.Model`), which an encoder-only run's may start.
    encoder_parts: ClassVar[dict[str, str]] = {
        "blocks": "encoder_blocks",
        "norm": "encoder_norm",
        "inputs": "source_inputs",
        "embedding": "src_embed/embedding",
    }
    kernel_choice: KernelChoice = dataclasses.field(kw_only=True)  # self-attention's kernel (`build_model`)

    @classmethod
    def matmul_weights(cls, cfg: ModelConfig) -> int | None:
        """Per target token, the source as long as the target (both padded to one bucket)."""
        return cfg.layers * (block_matmul_weights(cfg) + block_matmul_weights(cfg, cross=True))

    @classmethod
    def attention_flops(cls, cfg: ModelConfig, seq_len: int) -> int:
        """Encoder self-, decoder self- and cross-attention."""
        return 3 * 12 * cfg.layers * cfg.d_model * seq_len

    def setup(self) -> None:
        self.setup_embeddings()
        self.source_inputs = PositionalInputs(self.cfg)
        self.target_inputs = PositionalInputs(self.cfg)
        self.encoder_blocks = make_blocks(self.cfg, self.dtype, self.kernel_choice.kernel)
        self.decoder_blocks = make_blocks(self.cfg, self.dtype, self.kernel_choice.kernel, cross=True)
        if self.cfg.norm == "pre":
            self.encoder_norm = make_norm(self.cfg, self.dtype)
            self.decoder_norm = make_norm(self.cfg, self.dtype)

    def _encode(
        self,
        src: Array,
        src_mask: Array | None,
        train: bool,
        segments: Array | None = None,
        positions: Array | None = None,
    ) -> tuple[Array, Array]:
        """Returns the encoder output [B, S, D] and the [B, S] source mask."""
        src_mask = jnp.ones(src.shape, bool) if src_mask is None else src_mask
        if positions is None:
            positions = jnp.arange(src.shape[1], dtype=jnp.int32)
        x = self.source_inputs(self.source_embed(src), positions, train)
        mask = self_mask(causal=False, valid=src_mask, segments=segments, max_segments=self.kernel_choice.max_segments)
        x = run_blocks(self.encoder_blocks, self.cfg, x, positions, mask, train=train)
        if self.cfg.norm == "pre":
            x = self.encoder_norm(x)
        return x, src_mask

    def _finish(self, x: Array) -> Array:
        if self.cfg.norm == "pre":
            x = self.decoder_norm(x)
        return x.astype(jnp.float32)

    def __call__(
        self,
        tokens: Array,
        *,
        src: Array | None = None,
        src_mask: Array | None = None,
        mask: Array | None = None,
        embedded: Array | None = None,
        train: bool = False,
        segment_ids: Array | None = None,
        positions: Array | None = None,
        src_segment_ids: Array | None = None,
        src_positions: Array | None = None,
    ) -> Array:
        """tokens: [B, T] int32; src: [B, S] int32; src_mask: [B, S] bool or None.

        mask: [B, T] bool or None; embedded: [B, T, D] or None. Packed rows: segment_ids,
        positions [B, T] and src_segment_ids, src_positions [B, S] int32, all four or none.
        Returns [B, T, D] float32.
        """
        embedded = self.embedded_targets(tokens, mask, embedded, self.cfg.max_len)
        src = check_source(src, src_mask, tokens.shape[0])
        check_tokens(src, "src", max_len=self.cfg.max_len)
        check_packing(segment_ids, positions, tokens, self.cfg.max_len)
        check_packing(src_segment_ids, src_positions, src, self.cfg.max_len, "src_")
        if (segment_ids is None) != (src_segment_ids is None):
            raise ValueError("segment_ids and src_segment_ids come together (a packed batch), got only one of them")
        encoded, src_mask = self._encode(src, src_mask, train, src_segment_ids, src_positions)
        if positions is None:
            positions = jnp.arange(tokens.shape[1], dtype=jnp.int32)
        x = self.target_inputs(embedded, positions, train)
        window, dilation = self.cfg.window, self.cfg.dilation
        target_mask = self_mask(
            causal=True,
            window=window,
            dilation=dilation,
            valid=mask,
            segments=segment_ids,
            max_segments=self.kernel_choice.max_segments,
        )
        source_mask = padding_mask(src_mask)
        if segment_ids is not None and src_segment_ids is not None:
            source_mask = source_mask & segment_mask(segment_ids, src_segment_ids)
        x = run_blocks(self.decoder_blocks, self.cfg, x, positions, target_mask, encoded, source_mask, train)
        return self._finish(x)

    def init_decode_state(
        self, batch_size: int, max_len: int, src: Array | None = None, src_mask: Array | None = None
    ) -> dict[str, Any]:
        """Runs the encoder, projects its cross-attention keys/values, empties the caches.

        The memory and the source mask are `SharedByBeams`: a beam search's beams read their
        batch row's instead of each holding a copy that is reordered with them."""
        check_decode_size(batch_size, max_len, self.cfg.max_len)
        src = check_source(src, src_mask, batch_size)
        check_tokens(src, "src", max_len=self.cfg.max_len)
        encoded, src_mask = self._encode(src, src_mask, False)
        return {
            **empty_decode_cache(self.cfg, batch_size, max_len, self.dtype),
            "memory": SharedByBeams(block_memories(self.decoder_blocks, self.cfg, encoded)),
            "src_mask": SharedByBeams(src_mask),
            "positions": jnp.zeros((batch_size,), jnp.int32),
        }

    def decode_step(self, state: dict[str, Any], token: Array) -> tuple[Array, dict[str, Any]]:
        """token: [N] int32 -> (hidden [N, D] float32, next state); N = B, or B·K for a beam
        search's K beams sharing the cache and the memory. At most max_len steps."""
        positions = state["positions"]
        x = self.target_inputs(self.token_embed(token[:, None]), positions[:, None])
        source_mask = padding_mask(state["src_mask"].value)
        x, cache = decode_blocks(self.decoder_blocks, self.cfg, x, state, positions, state["memory"].value, source_mask)
        return self._finish(x[:, 0]), {**state, **cache, "positions": positions + 1}


MODELS.register("transformer_seq2seq", TransformerSeq2Seq, families=("neural", "attention", "causal_attention"))
