"""RNN encoder–decoder (Sutskever et al. 2014; Cho et al. 2014).

The encoder's final carry of layer l initializes decoder layer l; the decoder is then an
RNN LM over the target. No attention: the whole source passes through that state.
"""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
from jax import Array

from seqjax.config import MODELS
from seqjax.models.base import EncoderDecoder
from seqjax.models.input_checks import check_decode_size, check_source
from seqjax.models.recurrent.cells import Carry
from seqjax.models.recurrent.layers import Recurrent, RNNEncoder, run_stack, step_stack


class RNNSeq2Seq(EncoderDecoder):
    """(src [B, S], tokens [B, T]) → hidden [B, T, D]; row t predicts target token t+1.

    Decode state: {"carries": per-layer decoder carries}, each leaf [B, D].
    """

    recurrent: ClassVar[bool] = True

    def setup(self) -> None:
        d = self.cfg.d_model
        self.setup_embeddings()
        self.encoder = RNNEncoder(self.cfg, self.dtype)
        self.decoder_layers = [Recurrent(self.cfg.cell, d, d, dtype=self.dtype) for _ in range(self.cfg.layers)]
        self.dropout = nn.Dropout(self.cfg.dropout)

    def encode(self, src: Array, src_mask: Array | None = None, train: bool = False) -> tuple[Carry, ...]:
        """src: [B, S] int32 -> per-layer final encoder carries."""
        x = self.dropout(self.source_embed(src), deterministic=not train)
        _, finals = self.encoder(x, src_mask, train)
        return finals

    def decoder_hidden_states(
        self, x: Array, mask: Array | None, src: Array, src_mask: Array | None, train: bool
    ) -> Array:
        """x: [B, T, D] float32; mask: [B, T] bool or None; src: [B, S] int32; src_mask: [B, S]
        bool or None. Returns [B, T, D] float32."""
        finals = self.encode(src, src_mask, train)
        return run_stack(self.decoder_layers, x, mask, self.dropout, self.cfg.residual, train, finals)

    def init_decode_state(
        self, batch_size: int, max_len: int, src: Array | None = None, src_mask: Array | None = None
    ) -> dict[str, Any]:
        """Runs the encoder; its final carries start the decoder. max_len is unused."""
        check_decode_size(batch_size, max_len)
        src = check_source(src, src_mask, batch_size)
        return {"carries": self.encode(src, src_mask)}

    def decode_step(self, state: dict[str, Any], token: Array) -> tuple[Array, dict[str, Any]]:
        """token: [B] int32 -> (hidden [B, D] float32, next state)."""
        hidden, carries = step_stack(self.decoder_layers, state["carries"], self.token_embed(token), self.cfg.residual)
        return hidden, {"carries": carries}


MODELS.register("rnn_seq2seq", RNNSeq2Seq, families=("neural", "recurrent", "rnn_encoder"))
