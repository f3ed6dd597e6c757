"""RNN encoder–decoder (Sutskever et al. 2014; Cho et al. 2014).

The encoder's final carry of layer l initializes decoder layer l; the decoder is then an
RNN LM over the target. No attention: the whole source passes through that state.
"""

from __future__ import annotations

from typing import ClassVar

import flax.linen as nn

from seqjax.models.checks import check_decode_size, check_source
from seqjax.models.embeddings import EncoderDecoder
from seqjax.models.rnn import Recurrent, RNNEncoder


class RNNSeq2Seq(EncoderDecoder):
    """(src [B, S], tokens [B, T]) → hidden [B, T, D]; row t predicts target token t+1.

    Decode state: {"carries": per-layer decoder carries}, each leaf [B, D].
    """

    recurrent: ClassVar[bool] = True

    def setup(self):
        d = self.cfg.d_model
        self.setup_embeddings()
        self.encoder = RNNEncoder(self.cfg, self.dtype)
        self.decoder_layers = [Recurrent(self.cfg.cell, d, d, dtype=self.dtype) for _ in range(self.cfg.layers)]
        self.dropout = nn.Dropout(self.cfg.dropout)

    def encode(self, src, src_mask=None, train: bool = False):
        """src: [B, S] int32 -> per-layer final encoder carries."""
        x = self.dropout(self.source_embed(src), deterministic=not train)
        _, finals = self.encoder(x, src_mask, train)
        return finals

    def __call__(self, tokens, *, src=None, src_mask=None, mask=None, embedded=None, train: bool = False):
        """tokens: [B, T] int32; src: [B, S] int32; src_mask: [B, S] bool or None.

        mask: [B, T] bool or None; embedded: [B, T, D] or None. Returns [B, T, D] float32.
        """
        x = self.embedded_targets(tokens, mask, embedded)
        check_source(src, src_mask, tokens.shape[0])
        finals = self.encode(src, src_mask, train)
        x = self.dropout(x, deterministic=not train)
        for index, layer in enumerate(self.decoder_layers):
            outputs, _ = layer(x, mask, carry=finals[index])
            if index > 0 and self.cfg.residual:
                outputs = outputs + x
            x = self.dropout(outputs, deterministic=not train)
        return x

    def init_decode_state(self, batch_size: int, max_len: int, src=None, src_mask=None):
        """Runs the encoder; its final carries start the decoder. max_len is unused."""
        check_decode_size(batch_size, max_len)
        check_source(src, src_mask, batch_size)
        return {"carries": self.encode(src, src_mask)}

    def decode_step(self, state, token):
        """token: [B] int32 -> (hidden [B, D] float32, next state)."""
        x = self.token_embed(token)
        carries = []
        for index, layer in enumerate(self.decoder_layers):
            carry, outputs = layer.step(state["carries"][index], x)
            carries.append(carry)
            x = outputs + x if index > 0 and self.cfg.residual else outputs
        return x, {"carries": tuple(carries)}
