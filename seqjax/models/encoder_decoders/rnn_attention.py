"""Attention RNN encoder–decoder with input feeding (Luong et al. 2015).

Each decoder step reads [y_{t-1}; h̃_{t-1}] (input feeding), runs the stacked cells to
h_t, attends over the encoder outputs m_s and emits h̃_t = tanh(W_c [c_t; h_t]):
  additive (Bahdanau et al. 2015)  score = vᵀ tanh(W_q h_t + W_k m_s)
  dot (Luong)                      score = h_tᵀ m_s
  general (Luong)                  score = h_tᵀ W_a m_s
The source-side half of each score (W_k m_s, W_a m_s) is computed once per source, in
`init_decode_state` or before the teacher-forced scan.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import Array

from seqjax.config import MODELS, ModelConfig, Options, option
from seqjax.models.base import EncoderDecoder, dense_axes
from seqjax.models.input_checks import check_decode_size, check_source
from seqjax.models.recurrent.layers import Recurrent, RNNEncoder
from seqjax.placement import logical_param

AttentionScore = Literal["additive", "dot", "general"]


class SourceAttention(nn.Module):
    """Attention of one decoder state over the encoder outputs with a chosen score."""

    kind: str
    width: int
    dtype: Any = jnp.float32

    def setup(self) -> None:
        if self.kind in ("additive", "general"):
            self.key_projection = nn.Dense(
                self.width, use_bias=False, dtype=self.dtype, **dense_axes(("embed", "features"))
            )
        if self.kind == "additive":
            self.query_projection = nn.Dense(self.width, dtype=self.dtype, **dense_axes(("embed", "features")))
            init = nn.initializers.normal(self.width**-0.5)
            self.score_vector = logical_param(self, "score_vector", init, ("features",), (self.width,))

    def keys(self, memory: Array) -> Array:
        """memory: [B, S, D] -> keys [B, S, D] float32, the query-independent part."""
        if self.kind == "dot":
            return memory
        return self.key_projection(memory).astype(jnp.float32)

    def __call__(self, query: Array, keys: Array, memory: Array, mask: Array) -> Array:
        """query: [B, D]; keys, memory: [B, S, D]; mask: [B, S] bool -> context [B, D] float32."""
        if self.kind == "additive":
            projected = self.query_projection(query).astype(jnp.float32)
            scores = jnp.tanh(keys + projected[:, None, :]) @ self.score_vector
        else:
            scores = jnp.einsum("bsd,bd->bs", keys, query)
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
        weights = jax.nn.softmax(scores, axis=-1)
        return jnp.einsum("bs,bsd->bd", weights, memory)


class InputFeedingDecoder(nn.Module):
    """One decoder step: state {"carries", "feed"} and y_{t-1}'s embedding → h̃_t."""

    cfg: ModelConfig
    dtype: Any = jnp.float32

    def setup(self) -> None:
        d = self.cfg.d_model
        self.layers = [
            Recurrent(self.cfg.cell, 2 * d if index == 0 else d, d, dtype=self.dtype)
            for index in range(self.cfg.layers)
        ]
        self.attention = SourceAttention(self.cfg.options_of(AttentionSeq2SeqOptions).attention, d, self.dtype)
        self.combine = nn.Dense(d, dtype=self.dtype, **dense_axes(("embed", "features")))
        self.dropout = nn.Dropout(self.cfg.dropout)

    def keys(self, memory: Array) -> Array:
        return self.attention.keys(memory)

    def __call__(
        self, state: dict[str, Any], embedded: Array, source: dict[str, Array], train: bool = False
    ) -> tuple[dict[str, Any], Array]:
        """embedded: [B, D]; source {"memory", "keys", "mask"}. Returns (state, h̃ [B, D])."""
        x = jnp.concatenate([embedded, state["feed"]], axis=-1)
        carries = []
        for index, layer in enumerate(self.layers):
            carry, outputs = layer.step(state["carries"][index], x)
            carries.append(carry)
            if index > 0 and self.cfg.residual:
                outputs = outputs + x
            # Between layers only: the top layer's h_t feeds the attention, whose output
            # h̃_t gets the dropout.
            if index + 1 < len(self.layers):
                outputs = self.dropout(outputs, deterministic=not train)
            x = outputs
        context = self.attention(x, source["keys"], source["memory"], source["mask"])
        attentional = jnp.tanh(self.combine(jnp.concatenate([context, x], axis=-1)))
        attentional = self.dropout(attentional.astype(jnp.float32), deterministic=not train)
        return {"carries": tuple(carries), "feed": attentional}, attentional


def _decode_sequence(
    decoder: InputFeedingDecoder, state: dict[str, Any], embedded: Array, source: dict[str, Array], train: bool
) -> tuple[dict[str, Any], Array]:
    """Teacher forcing: the decoder step scanned over time. embedded: [B, T, D]; returns the
    last state and h̃ [B, T, D] float32."""

    def body(decoder: InputFeedingDecoder, state: dict[str, Any], embedded_t: Array) -> tuple[dict[str, Any], Array]:
        return decoder(state, embedded_t, source, train)

    scan = nn.scan(
        body,
        variable_broadcast="params",
        split_rngs={"params": False, "dropout": True},
        in_axes=1,
        out_axes=1,
    )
    return scan(decoder, state, embedded)


@dataclasses.dataclass(frozen=True)
class AttentionSeq2SeqOptions(Options):
    """The RNN encoder-decoder's attention score."""

    attention: AttentionScore = option("additive", "attention score: additive | dot | general")


class AttentionSeq2Seq(EncoderDecoder):
    """(src [B, S], tokens [B, T]) → hidden h̃ [B, T, D]; row t predicts target token t+1.

    Decode state: {"carries", "feed": [B, D], "source": {"memory", "keys": [B, S, D],
    "mask": [B, S]}}; every leaf has leading axis B.
    """

    recurrent: ClassVar[bool] = True

    def setup(self) -> None:
        self.setup_embeddings()
        self.encoder = RNNEncoder(self.cfg, self.dtype)
        self.decoder = InputFeedingDecoder(self.cfg, self.dtype)
        self.dropout = nn.Dropout(self.cfg.dropout)

    def _start(self, src: Array, src_mask: Array | None, train: bool) -> dict[str, Any]:
        """Encodes the source; returns the initial decoder state (carries from the encoder)."""
        x = self.dropout(self.source_embed(src), deterministic=not train)
        memory, finals = self.encoder(x, src_mask, train)
        mask = jnp.ones(src.shape, bool) if src_mask is None else src_mask
        feed = jnp.zeros((src.shape[0], self.cfg.d_model), jnp.float32)
        source = {"memory": memory, "keys": self.decoder.keys(memory), "mask": mask}
        return {"carries": finals, "feed": feed, "source": source}

    def decoder_hidden_states(
        self, x: Array, mask: Array | None, src: Array, src_mask: Array | None, train: bool
    ) -> Array:
        """x: [B, T, D] float32; mask: [B, T] bool or None (target padding is trailing, so
        causality makes it irrelevant to valid rows); src: [B, S] int32; src_mask: [B, S] bool
        or None. Returns [B, T, D] float32."""
        state = self._start(src, src_mask, train)
        x = self.dropout(x, deterministic=not train)
        start = {"carries": state["carries"], "feed": state["feed"]}
        _, hidden = _decode_sequence(self.decoder, start, x, state["source"], train)
        return hidden

    def init_decode_state(
        self, batch_size: int, max_len: int, src: Array | None = None, src_mask: Array | None = None
    ) -> dict[str, Any]:
        """Runs the encoder and precomputes the attention keys. max_len is unused."""
        check_decode_size(batch_size, max_len)
        src = check_source(src, src_mask, batch_size)
        return self._start(src, src_mask, False)

    def decode_step(self, state: dict[str, Any], token: Array) -> tuple[Array, dict[str, Any]]:
        """token: [B] int32 -> (hidden [B, D] float32, next state)."""
        step_state = {"carries": state["carries"], "feed": state["feed"]}
        step_state, hidden = self.decoder(step_state, self.token_embed(token), state["source"])
        return hidden, {**step_state, "source": state["source"]}


MODELS.register(
    "attention_seq2seq",
    AttentionSeq2Seq,
    options=AttentionSeq2SeqOptions,
    families=("neural", "recurrent", "rnn_encoder"),
)
