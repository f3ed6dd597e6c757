"""`build_model`: a model kind's module from its config, checked on the host first, its attention
kernel chosen once for the run's devices and rows (`kernel_choice` reads it back)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from seqjax.config import ATTENTION, ModelConfig
from seqjax.contracts import Model
from seqjax.models.attention_kernels.choice import KernelChoice, SelfAttentionRows, choose_kernel
from seqjax.models.config_checks import validate_model_config
from seqjax.models.kinds import is_seq2seq, is_trained, model_class


def build_model(
    cfg: ModelConfig,
    vocab_size: int,
    *,
    dtype: Any = jnp.float32,
    src_vocab_size: int | None = None,
    platform: str | None = None,
    rows: SelfAttentionRows | None = None,
    capability: tuple[int, int] | None = None,
) -> Model:
    """Returns the Linen module for `cfg.kind`; parameters float32, matmuls in `dtype`.

    src_vocab_size: seq2seq source vocabulary, vocab_size (a shared vocabulary) if None.
    platform: "cpu" | "gpu" | "tpu", the devices the model runs on (None: JAX's default
      backend), and rows: the rows its teacher-forced self-attention reads (None: unknown
      lengths, neither packed nor padded); a Transformer's `model.attention_kernel` is resolved
      for them (and a GPU's compute `capability`, where known), and the module carries the
      answer (`kernel_choice`).
    A counted kind (the n-gram) is not built but counted: its class's `count`.
    """
    validate_model_config(cfg, vocab_size, src_vocab_size)
    if not is_trained(cfg):
        raise ValueError(f"model.kind={cfg.kind!r} is counted from the train stream (its class's count), not built")
    extra: dict[str, Any] = {}
    if cfg.kind in ATTENTION:
        where = platform or jax.default_backend()
        extra["kernel_choice"] = choose_kernel(cfg, dtype, where, rows or SelfAttentionRows(), capability)
    if is_seq2seq(cfg):
        source = vocab_size if src_vocab_size is None else src_vocab_size
        result: Model = model_class(cfg)(cfg, vocab_size, source, dtype=dtype, **extra)
        return result
    result = model_class(cfg)(cfg, vocab_size, dtype=dtype, **extra)
    return result


def kernel_choice(model: Model) -> KernelChoice | None:
    """The attention kernel `build_model` chose for `model` (`KernelChoice`: the kernel asked for,
    the one it runs, any fallback to XLA and why), or None for a model without self-attention."""
    choice = getattr(model, "kernel_choice", None)
    return choice if isinstance(choice, KernelChoice) else None
