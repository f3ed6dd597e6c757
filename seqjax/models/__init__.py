"""Models: Flax Linen modules mapping tokens to hidden states [B, T, D], used via init/apply.

`build_model(cfg, vocab_size)` validates the config on the host and returns the module.
Every model exposes `embed`, `init_decode_state` and `decode_step` (see DESIGN.md).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from seqjax.config import ModelConfig
from seqjax.models.nnlm import NNLM
from seqjax.models.rnn import RNNLM
from seqjax.models.transformer import TransformerLM

LANGUAGE_MODELS = {"rnn": RNNLM, "transformer": TransformerLM, "nnlm": NNLM}
CELLS = ("lstm", "gru", "elman")
POSITIONS = ("sinusoidal", "learned")
NORMS = ("pre", "post")


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_one_of(name: str, value: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def validate_model_config(cfg: ModelConfig, vocab_size: int) -> None:
    """Raises ValueError naming the first config value outside its rule."""
    _check_one_of("model.kind", cfg.kind, tuple(LANGUAGE_MODELS))
    _check_positive("vocab_size", vocab_size)
    _check_positive("model.d_model", cfg.d_model)
    _check_positive("model.layers", cfg.layers)
    if not 0.0 <= cfg.dropout < 1.0:
        raise ValueError(f"model.dropout must be in [0, 1), got {cfg.dropout}")
    if cfg.kind == "rnn":
        _check_one_of("model.cell", cfg.cell, CELLS)
    if cfg.kind == "nnlm":
        _check_positive("model.context", cfg.context)
    if cfg.kind == "transformer":
        _check_positive("model.heads", cfg.heads)
        _check_positive("model.d_ff", cfg.d_ff)
        _check_positive("model.max_len", cfg.max_len)
        _check_positive("model.dilation", cfg.dilation)
        _check_one_of("model.positions", cfg.positions, POSITIONS)
        _check_one_of("model.norm", cfg.norm, NORMS)
        if cfg.d_model % cfg.heads:
            raise ValueError(
                f"model.d_model must be divisible by model.heads={cfg.heads}, got {cfg.d_model}"
            )
        if cfg.positions == "sinusoidal" and cfg.d_model % 2:
            raise ValueError(
                f"model.d_model must be even for sinusoidal positions, got {cfg.d_model}"
            )
        if not isinstance(cfg.window, int) or cfg.window < 0:
            raise ValueError(f"model.window must be an int >= 0 (0: unbounded), got {cfg.window}")


def build_model(cfg: ModelConfig, vocab_size: int, *, dtype: Any = jnp.float32):
    """Returns the Linen module for `cfg.kind`; parameters float32, matmuls in `dtype`."""
    validate_model_config(cfg, vocab_size)
    return LANGUAGE_MODELS[cfg.kind](cfg, vocab_size, dtype=dtype)


__all__ = ["build_model", "validate_model_config", "NNLM", "RNNLM", "TransformerLM"]
