"""The decoder-only Transformer LM (blocks in `blocks.py`, the layer stack in `stack.py`).

Decoding keeps a KV cache per layer, [B, K, max_len, Dh] each for keys and values (K the
key/value heads), and a [B] int32 position per row: a step writes one slot and attends over
the whole fixed-size buffer under a mask, so its cost does not grow with the prefix.

Packed rows (`data.packing`) come with segment_ids [B, T] (0 for padding) and each token's
position within its segment: attention stays within a segment and the positions restart at
0, so every segment is computed as if it were alone in its row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
from jax import Array

from seqjax.config import MODELS, ModelConfig
from seqjax.models.attention_kernels.choice import KernelChoice
from seqjax.models.base import PackedTokenModel, token_embedding
from seqjax.models.input_checks import check_decode_size
from seqjax.models.transformer.blocks import block_matmul_weights, make_norm
from seqjax.models.transformer.masks import self_mask
from seqjax.models.transformer.positions import PositionalInputs
from seqjax.models.transformer.stack import decode_blocks, empty_decode_cache, make_blocks, run_blocks


class TransformerLM(PackedTokenModel):
    """Decoder-only Transformer: tokens [B, T] → hidden [B, T, D] (row t predicts token t+1).

    Self-attention is causal, limited to `cfg.window` keys spaced `cfg.dilation` apart
    when window > 0. Decode state: {"cache", "slot_rows": the stack's KV caches
    (`stack.empty_decode_cache`), "positions": [B] int32}.
    """

    dtype: Any = jnp.float32
    kernel_choice: KernelChoice = dataclasses.field(kw_only=True)  # self-attention's kernel (`build_model`)

    @classmethod
    def matmul_weights(cls, cfg: ModelConfig) -> int | None:
        return cfg.layers * block_matmul_weights(cfg)

    @classmethod
    def attention_flops(cls, cfg: ModelConfig, seq_len: int) -> int:
        return 12 * cfg.layers * cfg.d_model * seq_len

    def setup(self) -> None:
        self.token_embed = token_embedding(self.vocab_size, self.cfg.d_model, "embed")
        self.inputs = PositionalInputs(self.cfg)
        self.blocks = make_blocks(self.cfg, self.dtype, self.kernel_choice.kernel)
        if self.cfg.norm == "pre":
            self.final_norm = make_norm(self.cfg, self.dtype)

    def _finish(self, x: Array) -> Array:
        if self.cfg.norm == "pre":
            x = self.final_norm(x)
        return x.astype(jnp.float32)

    def packed_hidden_states(
        self, x: Array, mask: Array | None, positions: Array, segment_ids: Array | None, train: bool
    ) -> Array:
        """x: [B, T, D] float32 lookups; mask: [B, T] bool or None; positions: [B, T] or [T]
        int32; segment_ids: [B, T] int32 or None. Returns hidden: [B, T, D] float32."""
        x = self.inputs(x, positions, train)
        attention_mask = self_mask(
            causal=True,
            window=self.cfg.window,
            dilation=self.cfg.dilation,
            valid=mask,
            segments=segment_ids,
            max_segments=self.kernel_choice.max_segments,
        )
        x = run_blocks(self.blocks, self.cfg, x, positions, attention_mask, train=train)
        return self._finish(x)

    def init_decode_state(self, batch_size: int, max_len: int) -> dict[str, Any]:
        """Empty KV caches of max_len ≤ cfg.max_len slots (`stack.empty_decode_cache`) and
        the rows' positions; every leaf has leading axis B."""
        check_decode_size(batch_size, max_len, self.cfg.max_len)
        return {
            **empty_decode_cache(self.cfg, batch_size, max_len, self.dtype),
            "positions": jnp.zeros((batch_size,), jnp.int32),
        }

    def decode_step(self, state: dict[str, Any], token: Array) -> tuple[Array, dict[str, Any]]:
        """token: [N] int32 -> (hidden [N, D] float32, next state); N = B, or B·K for a beam
        search's K beams sharing the cache.

        Valid for at most max_len steps (the cache size given to init_decode_state).
        """
        positions = state["positions"]
        x = self.inputs(self.token_embed(token[:, None]), positions[:, None])
        x, cache = decode_blocks(self.blocks, self.cfg, x, state, positions)
        return self._finish(x[:, 0]), {**state, **cache, "positions": positions + 1}


MODELS.register("transformer", TransformerLM, families=("neural", "attention", "causal_attention"))
