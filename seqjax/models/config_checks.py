"""The host check of a model's config: every value against its rule, before anything is built."""

from __future__ import annotations

import typing

from seqjax.checks import check_int, check_number, check_one_of
from seqjax.config import ATTENTION, ATTENTION_KERNELS, MODELS, RECURRENT, RNN_ENCODERS, ModelConfig
from seqjax.config.sections import Cell, Mlp, Norm, NormType, Positions, Remat, RopeScaling
from seqjax.models.kinds import is_trained, model_class


def _check_transformer(cfg: ModelConfig) -> None:
    for name in ("num_heads", "d_ff", "max_len", "dilation"):
        check_int(f"model.{name}", getattr(cfg, name))
    for name, choices in (("positions", Positions), ("norm", Norm), ("norm_type", NormType), ("mlp", Mlp)):
        check_one_of(f"model.{name}", getattr(cfg, name), typing.get_args(choices))
    check_one_of("model.remat", cfg.remat, typing.get_args(Remat))
    check_one_of("model.attention_kernel", cfg.attention_kernel, ("auto", *ATTENTION_KERNELS))
    check_int("model.head_dim", cfg.head_dim, 0)
    if not cfg.head_dim and cfg.d_model % cfg.num_heads:
        raise ValueError(
            f"model.d_model must be divisible by model.num_heads={cfg.num_heads} (model.head_dim=0), got {cfg.d_model}"
        )
    if cfg.positions == "sinusoidal" and cfg.d_model % 2:
        raise ValueError(f"model.d_model must be even for sinusoidal positions, got {cfg.d_model}")
    if cfg.positions == "rope" and cfg.head_width % 2:
        raise ValueError(
            f"the head width (model.head_dim, else model.d_model / model.num_heads) must be even for rope positions, "
            f"got {cfg.head_width}"
        )
    if check_number("model.norm_eps", cfg.norm_eps, 0.0, open_low=True) >= 1.0:
        raise ValueError(f"model.norm_eps must be in (0, 1), got {cfg.norm_eps!r}")
    check_number("model.rope_base", cfg.rope_base, 1.0, open_low=True)
    check_one_of("model.rope_scaling", cfg.rope_scaling, typing.get_args(RopeScaling))
    if cfg.rope_scaling == "llama3":
        check_number("model.rope_factor", cfg.rope_factor, 1.0)
        low = check_number("model.rope_low_freq_factor", cfg.rope_low_freq_factor, 0.0, open_low=True)
        if check_number("model.rope_high_freq_factor", cfg.rope_high_freq_factor, 0.0, open_low=True) <= low:
            raise ValueError(
                f"model.rope_high_freq_factor must exceed model.rope_low_freq_factor={low!r}, "
                f"got {cfg.rope_high_freq_factor!r}"
            )
        check_int("model.rope_original_max_len", cfg.rope_original_max_len)
    check_int("model.kv_heads", cfg.kv_heads, 0)
    if cfg.kv_heads and cfg.num_heads % cfg.kv_heads:
        raise ValueError(
            f"model.num_heads={cfg.num_heads} must be divisible by model.kv_heads (query heads share each "
            f"key/value head in equal groups), got {cfg.kv_heads}"
        )
    check_int("model.window", cfg.window, 0)


def validate_model_config(cfg: ModelConfig, vocab_size: int, src_vocab_size: int | None = None) -> None:
    """Raises ValueError naming the first config value outside its rule."""
    check_one_of("model.kind", cfg.kind, tuple(MODELS))
    check_int("vocab_size", vocab_size)
    if not is_trained(cfg):
        check_own_options(cfg)
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
    check_own_options(cfg)


def check_own_options(cfg: ModelConfig) -> None:
    """The check a kind's class makes of its own options (`check_config`, where it has one)."""
    check = getattr(model_class(cfg), "check_config", None)
    if check is not None:
        check(cfg)
    if cfg.kind == "nnlm":
        check_int("model.context", cfg.context)
    if cfg.kind in RNN_ENCODERS and cfg.bidirectional and cfg.d_model % 2:
        raise ValueError(
            f"model.d_model must be even for a bidirectional encoder (D/2 per direction), got {cfg.d_model}"
        )
