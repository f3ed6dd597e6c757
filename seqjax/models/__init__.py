"""Models: Flax Linen modules mapping tokens to hidden states [B, T, D], used via init/apply.

Each `model.kind` registers itself in its own module (`MODELS.register("rnn", RNNLM, families=...)`,
`seqjax.config.kinds`); importing this package registers the built-in ones. `build_model(cfg,
vocab_size)` validates the config on the host and returns the module. Every neural model follows
`seqjax.contracts.Model` (`embed`, `target_embedding`, `init_decode_state`, `decode_step`,
`has_encoder`, `recurrent`); encoder-decoders (`is_seq2seq(cfg)`) also take `src`/`src_mask`
in `apply` and in `init_decode_state`. The n-gram baseline (`ngram.KneserNeyLM`) is counted
on the host from the train stream instead (`is_trained(cfg)` is False).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from seqjax.checks import check_int, check_number, check_one_of
from seqjax.config import (
    ATTENTION,
    ATTENTION_KERNELS,
    ENCODERS,
    MODELS,
    RECURRENT,
    RNN_ENCODERS,
    TRANSFORMERS,
    ModelConfig,
)
from seqjax.config.sections import Cell, Mlp, Norm, NormType, Positions, Remat
from seqjax.contracts import Model
from seqjax.models.attention import resolve_kernel
from seqjax.models.bilm import BiLM
from seqjax.models.encoder import ElectraEncoder, TransformerEncoder, generator_config
from seqjax.models.ngram import KneserNeyLM
from seqjax.models.nnlm import NNLM
from seqjax.models.rnn import RNNLM
from seqjax.models.seq2seq_attention import AttentionSeq2Seq
from seqjax.models.seq2seq_rnn import RNNSeq2Seq
from seqjax.models.seq2seq_transformer import TransformerSeq2Seq
from seqjax.models.transformer import TransformerLM
from seqjax.models.vae import RNNVAE


def model_class(cfg: ModelConfig) -> Any:
    """The class registered for `cfg.kind` (its class facts: `has_encoder`, `recurrent`, ...)."""
    return MODELS[cfg.kind].build


class _ClassFacts(Mapping[str, Any]):
    """kind -> the value of `fact` on its registered class, for the kinds whose class states it (a
    true value): a live view, so that a kind registered later is in it."""

    def __init__(self, fact: str) -> None:
        self._fact = fact

    def _table(self) -> dict[str, Any]:
        stated = {kind.name: getattr(kind.build, self._fact, None) for kind in MODELS.kinds()}
        return {kind: value for kind, value in stated.items() if value}

    def __getitem__(self, kind: str) -> Any:
        return self._table()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


# kind -> the one objective that trains it, for models whose parts only that objective reaches
MODEL_OBJECTIVES = _ClassFacts("objective")
SEQ2SEQ_KINDS = _ClassFacts("has_encoder")  # iterating gives the kinds
TRANSFORMER_KINDS = TRANSFORMERS  # causal self-attention: sliding windows, packed segments
# the encoder-decoders whose encoder `train.init_encoder_from` starts from an encoder-only run
PRETRAINED_ENCODER_KINDS = _ClassFacts("takes_pretrained_encoder")
ENCODER_KINDS = ENCODERS  # encoder-only: no decode step


def is_seq2seq(cfg: ModelConfig) -> bool:
    """True for encoder–decoders, whose apply and init_decode_state take src/src_mask."""
    return bool(model_class(cfg).has_encoder)


def is_latent(cfg: ModelConfig) -> bool:
    """True for latent-variable models (the VAE LM), trained by the vae objective and scored
    by their evidence lower bound."""
    return bool(getattr(model_class(cfg), "latent", False))


def generates(cfg: ModelConfig) -> bool:
    """True for the models with a decode step (every kind but the encoder-only ones)."""
    return bool(getattr(model_class(cfg), "generates", True))


def readable_length(cfg: ModelConfig) -> int | None:
    """The longest sequence the model reads: model.max_len for the models with positions up to it
    (those of Transformer blocks), else None (no limit)."""
    return cfg.max_len if cfg.kind in ATTENTION else None


def is_trained(cfg: ModelConfig) -> bool:
    """True for the Linen models trained by gradient steps; False for the counted n-gram."""
    return issubclass(model_class(cfg), nn.Module)


def _check_transformer(cfg: ModelConfig) -> None:
    for name in ("num_heads", "d_ff", "max_len", "dilation"):
        check_int(f"model.{name}", getattr(cfg, name))
    for name, choices in (("positions", Positions), ("norm", Norm), ("norm_type", NormType), ("mlp", Mlp)):
        check_one_of(f"model.{name}", getattr(cfg, name), typing.get_args(choices))
    check_one_of("model.remat", cfg.remat, typing.get_args(Remat))
    check_one_of("model.attention_kernel", cfg.attention_kernel, ("auto", *ATTENTION_KERNELS))
    if cfg.d_model % cfg.num_heads:
        raise ValueError(f"model.d_model must be divisible by model.num_heads={cfg.num_heads}, got {cfg.d_model}")
    if cfg.positions == "sinusoidal" and cfg.d_model % 2:
        raise ValueError(f"model.d_model must be even for sinusoidal positions, got {cfg.d_model}")
    if cfg.positions == "rope" and (cfg.d_model // cfg.num_heads) % 2:
        raise ValueError(
            f"model.d_model / model.num_heads (the head width) must be even for rope positions, "
            f"got {cfg.d_model} / {cfg.num_heads}"
        )
    if check_number("model.norm_eps", cfg.norm_eps, 0.0, open_low=True) >= 1.0:
        raise ValueError(f"model.norm_eps must be in (0, 1), got {cfg.norm_eps!r}")
    check_number("model.rope_base", cfg.rope_base, 1.0, open_low=True)
    check_int("model.kv_heads", cfg.kv_heads, 0)
    if cfg.kv_heads and cfg.num_heads % cfg.kv_heads:
        raise ValueError(
            f"model.num_heads={cfg.num_heads} must be divisible by model.kv_heads (query heads share each "
            f"key/value head in equal groups), got {cfg.kv_heads}"
        )
    check_int("model.window", cfg.window, 0)


def resolved_kernel(cfg: ModelConfig, dtype: Any, platform: str) -> str:
    """model.attention_kernel as the implementation it means on `platform`'s devices, checked:
    cuDNN runs on an NVIDIA GPU on 16-bit operands, the splash kernel on a TPU."""
    kernel = resolve_kernel(cfg.attention_kernel, dtype, cfg.d_model // cfg.num_heads, platform)
    needs = {"cudnn": "gpu", "splash": "tpu"}.get(kernel)
    if needs is not None and platform != needs:
        raise ValueError(
            f"model.attention_kernel={kernel} needs a {needs.upper()}, but the run's devices are {platform!r} "
            "(auto and xla run anywhere)"
        )
    if kernel == "cudnn" and jnp.dtype(dtype) not in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)):
        raise ValueError(
            f"model.attention_kernel=cudnn needs 16-bit matmuls (train.precision=bfloat16), got {jnp.dtype(dtype)}"
        )
    return kernel


def validate_model_config(cfg: ModelConfig, vocab_size: int, src_vocab_size: int | None = None) -> None:
    """Raises ValueError naming the first config value outside its rule."""
    check_one_of("model.kind", cfg.kind, tuple(MODELS))
    check_int("vocab_size", vocab_size)
    if not is_trained(cfg):
        check_int("model.context", cfg.context, 0)
        return
    if src_vocab_size is not None:
        check_int("src_vocab_size", src_vocab_size)
    check_int("model.d_model", cfg.d_model)
    check_int("model.layers", cfg.layers)
    if check_number("model.dropout", cfg.dropout, 0.0) >= 1.0:
        raise ValueError(f"model.dropout must be in [0, 1), got {cfg.dropout!r}")
    if cfg.kind in RECURRENT:
        check_one_of("model.cell", cfg.cell, typing.get_args(Cell))
    if cfg.kind in ATTENTION:
        _check_transformer(cfg)
    if cfg.kind == "electra":
        generator_config(cfg)
    if cfg.kind == "nnlm":
        check_int("model.context", cfg.context)
    if cfg.kind in RNN_ENCODERS and cfg.bidirectional and cfg.d_model % 2:
        raise ValueError(
            f"model.d_model must be even for a bidirectional encoder (D/2 per direction), got {cfg.d_model}"
        )


def build_model(
    cfg: ModelConfig,
    vocab_size: int,
    *,
    dtype: Any = jnp.float32,
    src_vocab_size: int | None = None,
    platform: str | None = None,
) -> Model:
    """Returns the Linen module for `cfg.kind`; parameters float32, matmuls in `dtype`.

    src_vocab_size: seq2seq source vocabulary, vocab_size (a shared vocabulary) if None.
    platform: "cpu" | "gpu" | "tpu", the devices the model runs on (None: JAX's default
    backend); `model.attention_kernel=auto` is resolved for them.
    The n-gram kind is not built but counted: `seqjax.models.ngram.fit`.
    """
    validate_model_config(cfg, vocab_size, src_vocab_size)
    if not is_trained(cfg):
        raise ValueError(
            f"model.kind={cfg.kind!r} is counted from the train stream (seqjax.models.ngram.fit), not built"
        )
    if cfg.kind in ATTENTION:
        kernel = resolved_kernel(cfg, dtype, platform or jax.default_backend())
        cfg = dataclasses.replace(cfg, attention_kernel=kernel)
    if is_seq2seq(cfg):
        source = vocab_size if src_vocab_size is None else src_vocab_size
        return model_class(cfg)(cfg, vocab_size, source, dtype=dtype)
    return model_class(cfg)(cfg, vocab_size, dtype=dtype)


__all__ = [
    "AttentionSeq2Seq",
    "BiLM",
    "ElectraEncoder",
    "KneserNeyLM",
    "NNLM",
    "RNNLM",
    "RNNVAE",
    "RNNSeq2Seq",
    "TransformerLM",
    "TransformerEncoder",
    "TransformerSeq2Seq",
    "MODEL_OBJECTIVES",
    "build_model",
    "generates",
    "is_latent",
    "is_seq2seq",
    "is_trained",
    "model_class",
    "resolved_kernel",
    "validate_model_config",
]
