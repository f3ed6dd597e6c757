"""GPT-2 (`transformers`' `GPT2LMHeadModel`) as seqjax's classic Transformer LM, both ways.

Conventions of the mapping:

- Learned positions (`wpe`, n_positions rows = model.max_len), pre-LayerNorm blocks with a
  final `ln_f`, biases everywhere, full multi-head attention, embeddings added unscaled
  (`model.scale_embeddings=false`), LayerNorm epsilon `layer_norm_epsilon` (model.norm_eps).
- q, k and v are one fused projection in both: `c_attn` is a `Conv1D`, already [in, out] =
  [D, 3·H·Dh] with columns q | k | v, each head-major, which is seqjax's [D, 3, H, Dh] kernel
  reshaped. `c_proj` [H·Dh, D] is the output kernel [H, Dh, D]; the MLP's `c_fc`, `c_proj`
  are `ff_in`, `ff_out` as they are.
- GELU: `gelu_new`, `gelu_pytorch_tanh` and `gelu_fast` are the tanh approximation
  (model.mlp=gelu); `gelu` is the exact, erf one (gelu_exact); relu is relu.
- The output layer is `wte` itself when tied (`tie_word_embeddings`, GPT-2's default;
  head.tied=true), else `lm_head.weight` [V, D]; it has no bias.
- Attention scaled by 1/√Dh only: `scale_attn_by_inverse_layer_idx` has no counterpart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seqjax.config import ModelConfig
from seqjax.config.sections import Mlp
from seqjax.pretrained.mapping import Tensor, reshaped, vocabulary_table
from seqjax.pretrained.twins import Settings, twin_config, unmet_settings

NAME = "gpt2"
MODEL_TYPES = ("gpt2",)
ACTIVATIONS: dict[str, Mlp] = {
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "gelu": "gelu_exact",
    "relu": "relu",
}
EXPORTED_ACTIVATIONS: dict[str, str] = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu"}
# What GPT-2's twin has besides every family's `TRANSFORMER_LM` settings.
SETTINGS: Settings = {
    "positions": ("learned", "learned positions"),
    "norm_type": ("layernorm", "LayerNorm"),
    "bias": (True, "biases"),
}
# Causal-mask buffers some GPT-2 checkpoints carry beside the weights: not parameters.
BUFFERS = (".attn.bias", ".attn.masked_bias")


def model_config(hf: dict[str, Any]) -> tuple[ModelConfig, bool, int]:
    """(seqjax's model config, whether the output layer is tied, the vocabulary's rows) of a
    GPT-2 config.json; ValueError naming a setting seqjax has no counterpart for."""
    activation = hf.get("activation_function", "gelu_new")
    if activation not in ACTIVATIONS:
        raise ValueError(f"GPT-2 activation_function={activation!r} has no counterpart; seqjax has {list(ACTIVATIONS)}")
    for key, needed in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False)):
        if hf.get(key, needed) != needed:
            raise ValueError(
                f"GPT-2 {key}={hf[key]!r} has no counterpart: seqjax scales attention by 1/sqrt(head width)"
            )
    if hf.get("add_cross_attention", False):
        raise ValueError("GPT-2 add_cross_attention=true has no counterpart: seqjax imports decoder-only LMs")
    d_model = hf.get("n_embd", 768)
    cfg = twin_config(
        SETTINGS,
        d_model=d_model,
        layers=hf.get("n_layer", 12),
        num_heads=hf.get("n_head", 12),
        d_ff=hf.get("n_inner") or 4 * d_model,
        max_len=hf.get("n_positions", 1024),
        norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
        mlp=ACTIVATIONS[activation],
        kv_heads=0,
    )
    return cfg, bool(hf.get("tie_word_embeddings", True)), hf.get("vocab_size", 50257)


def differences(cfg: ModelConfig) -> list[str]:
    """What keeps `cfg` from being a GPT-2 (`key=value, GPT-2 has X`), empty for a twin."""
    out = unmet_settings(cfg, SETTINGS, "GPT-2")
    if cfg.mlp not in EXPORTED_ACTIVATIONS:
        out.append(f"model.mlp={cfg.mlp!r}, GPT-2 has one of {list(EXPORTED_ACTIVATIONS)}")
    if cfg.kv_heads not in (0, cfg.num_heads):
        out.append(f"model.kv_heads={cfg.kv_heads}, GPT-2 has full multi-head attention")
    return out


def hf_config(cfg: ModelConfig, rows: int, tied: bool) -> dict[str, Any]:
    """config.json of the GPT-2 twin of `cfg` (no `differences`)."""
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": rows,
        "n_positions": cfg.max_len,
        "n_embd": cfg.d_model,
        "n_layer": cfg.layers,
        "n_head": cfg.num_heads,
        "n_inner": cfg.d_ff,
        "activation_function": EXPORTED_ACTIVATIONS[cfg.mlp],
        "layer_norm_epsilon": cfg.norm_eps,
        "resid_pdrop": cfg.dropout,
        "embd_pdrop": cfg.dropout,
        "attn_pdrop": 0.0,  # seqjax drops residual branches and embeddings, not attention weights
        "tie_word_embeddings": tied,
    }


def canonical(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`GPT2LMHeadModel`'s names: those of a bare `GPT2Model` checkpoint gain the "transformer."
    prefix, and causal-mask buffers are dropped."""
    out = {}
    for name, value in tensors.items():
        if name.endswith(BUFFERS):
            continue
        out[name if name.startswith(("transformer.", "lm_head.")) else "transformer." + name] = value
    return out


def table(cfg: ModelConfig, rows: int, tied: bool) -> list[Tensor]:
    """Every tensor of the GPT-2 twin of `cfg` with its place among seqjax's parameters."""
    d, h, f = cfg.d_model, cfg.num_heads, cfg.d_ff
    dh = d // h
    out = [
        vocabulary_table("transformer.wte.weight", (rows, d), ("model", "embed", "embedding")),
        reshaped(
            "transformer.wpe.weight",
            (cfg.max_len, d),
            ("model", "inputs", "position_embed", "embedding"),
            (cfg.max_len, d),
        ),
        reshaped("transformer.ln_f.weight", (d,), ("model", "final_norm", "scale"), (d,)),
        reshaped("transformer.ln_f.bias", (d,), ("model", "final_norm", "bias"), (d,)),
    ]
    if not tied:
        out.append(vocabulary_table("lm_head.weight", (rows, d), ("head", "weights")))
    for i in range(cfg.layers):
        hf, block = f"transformer.h.{i}.", ("model", f"blocks_{i}")
        attention = (*block, "self_attention")
        out += [
            reshaped(hf + "ln_1.weight", (d,), (*block, "self_norm", "scale"), (d,)),
            reshaped(hf + "ln_1.bias", (d,), (*block, "self_norm", "bias"), (d,)),
            reshaped(hf + "attn.c_attn.weight", (d, 3 * d), (*attention, "qkv", "kernel"), (d, 3, h, dh)),
            reshaped(hf + "attn.c_attn.bias", (3 * d,), (*attention, "qkv", "bias"), (3, h, dh)),
            reshaped(hf + "attn.c_proj.weight", (d, d), (*attention, "out", "kernel"), (h, dh, d)),
            reshaped(hf + "attn.c_proj.bias", (d,), (*attention, "out", "bias"), (d,)),
            reshaped(hf + "ln_2.weight", (d,), (*block, "ff_norm", "scale"), (d,)),
            reshaped(hf + "ln_2.bias", (d,), (*block, "ff_norm", "bias"), (d,)),
            reshaped(hf + "mlp.c_fc.weight", (d, f), (*block, "ff_in", "kernel"), (d, f)),
            reshaped(hf + "mlp.c_fc.bias", (f,), (*block, "ff_in", "bias"), (f,)),
            reshaped(hf + "mlp.c_proj.weight", (f, d), (*block, "ff_out", "kernel"), (f, d)),
            reshaped(hf + "mlp.c_proj.bias", (d,), (*block, "ff_out", "bias"), (d,)),
        ]
    return out
