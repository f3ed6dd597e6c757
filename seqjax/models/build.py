"""`build_model`: a model kind's module, from its config, checked on the host first."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from seqjax.config import ATTENTION, ModelConfig
from seqjax.contracts import Model
from seqjax.models.config_checks import validate_model_config
from seqjax.models.kinds import is_seq2seq, is_trained, model_class
from seqjax.models.transformer.attention import resolve_kernel


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
