"""Llama (`transformers`' `LlamaForCausalLM`) as seqjax's modern Transformer LM, both ways.

Conventions of the mapping:

- Rotary positions, pre-RMSNorm blocks with a final `norm` (epsilon `rms_norm_eps` =
  model.norm_eps), SwiGLU (`hidden_act` silu: gate_proj = ff_gate, up_proj = ff_in,
  down_proj = ff_out), no biases unless `attention_bias` and `mlp_bias` both say so (seqjax has
  one switch, model.bias), embeddings added unscaled (model.scale_embeddings=false). Qwen2
  (qwen2.py), Qwen3 (qwen3.py) and Mistral (mistral.py) are this table with q, k, v biases
  (model.qkv_bias), q and k RMSNorms (model.qk_norm) or a sliding window (model.window).
- Projections are torch `Linear` weights [out, in]: transposed into Flax kernels [in, out],
  then split into heads, head-major (row h·Dh + i of q_proj is feature i of head h). Heads
  are `head_dim` wide (model.head_dim where that is not hidden_size / num_attention_heads; the
  output projection is then [H·Dh, D], not square).
- q, k and v are separate in Llama. With as many key/value heads as query heads seqjax fuses
  them into one [D, 3, H, Dh] kernel (q, k, v along axis 1); with fewer (grouped-query
  attention) q is [D, H, Dh] and k, v are fused into [D, 2, K, Dh]. Query head h reads
  key/value head h // (H / K) in both (`repeat_kv`'s order): heads are not reordered.
- RoPE: transformers' Llama turns feature i of a head with feature i + Dh/2 (rotate-half,
  the GPT-NeoX layout), as seqjax's `rotary` does, with the same angles position ·
  θ^(-2i/Dh), θ = `rope_theta` (model.rope_base); so q_proj and k_proj are taken as they are.
  Meta's original checkpoints pair features 2i and 2i+1 (interleaved); their conversion to
  transformers permutes the rows of q_proj and k_proj, so a transformers checkpoint is always
  rotate-half. `rope_scaling` "llama3" (Llama 3.1 and 3.2) is model.rope_scaling=llama3 with
  its factor, low_freq_factor, high_freq_factor and original_max_position_embeddings
  (model.rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_original_max_len);
  linear, dynamic, YaRN and the others have no counterpart.
- The output layer is `embed_tokens` when tied (`tie_word_embeddings`, head.tied=true), else
  `lm_head.weight` [V, D], without a bias.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seqjax.config import ModelConfig
from seqjax.pretrained.mapping import Path, Tensor, linear, reshaped, vocabulary_table
from seqjax.pretrained.twins import Settings, twin_config, unmet_settings

NAME = "llama"
MODEL_TYPES = ("llama",)
BUFFERS = (".rotary_emb.inv_freq",)  # rotary frequencies some checkpoints store: computed, not read
# What Llama's twin has besides every family's `TRANSFORMER_LM` settings.
SETTINGS: Settings = {
    "positions": ("rope", "rotary positions"),
    "norm_type": ("rmsnorm", "RMSNorm"),
    "mlp": ("swiglu", "SwiGLU"),
}


# Llama 3.1's rope_scaling entries and the model options holding them.
LLAMA3_KEYS = {
    "factor": "rope_factor",
    "low_freq_factor": "rope_low_freq_factor",
    "high_freq_factor": "rope_high_freq_factor",
    "original_max_position_embeddings": "rope_original_max_len",
}


def _rope(hf: dict[str, Any]) -> dict[str, Any]:
    """The model options of the rotary positions of transformers 5's `rope_parameters` or 4's
    `rope_theta` and `rope_scaling`; ValueError naming a scaling seqjax has no counterpart for."""
    parameters = {**(hf.get("rope_scaling") or {}), **(hf.get("rope_parameters") or {})}
    theta = parameters.get("rope_theta", hf.get("rope_theta", 10000.0))
    kind = parameters.get("rope_type") or parameters.get("type") or "default"
    if kind == "default":
        return {"rope_base": float(theta)}
    if kind != "llama3":
        raise ValueError(
            f"rope_scaling rope_type={kind!r} has no counterpart: seqjax's rotary positions are unscaled or llama3"
        )
    missing = [key for key in LLAMA3_KEYS if key not in parameters]
    if missing:
        raise ValueError(f"rope_scaling rope_type='llama3' without {', '.join(missing)}: seqjax reads all of them")
    options = {"rope_base": float(theta), "rope_scaling": "llama3"}
    # JSON may write a whole factor as an int: each option keeps its own type.
    return options | {
        option: type(getattr(ModelConfig, option))(parameters[key]) for key, option in LLAMA3_KEYS.items()
    }


def _rope_config(cfg: ModelConfig) -> dict[str, Any]:
    """config.json's rotary settings of `cfg`, as transformers 4 (`rope_theta`, `rope_scaling`)
    and 5 (`rope_parameters`) read them."""
    parameters: dict[str, Any] = {"rope_type": "default", "rope_theta": cfg.rope_base}
    if cfg.rope_scaling == "none":
        return {"rope_theta": cfg.rope_base, "rope_parameters": parameters}
    scaling = {"rope_type": "llama3"} | {key: getattr(cfg, option) for key, option in LLAMA3_KEYS.items()}
    return {
        "rope_theta": cfg.rope_base,
        "rope_scaling": scaling,
        "rope_parameters": scaling | {"rope_theta": cfg.rope_base},
    }


def model_config(hf: dict[str, Any]) -> tuple[ModelConfig, bool, int]:
    """(seqjax's model config, whether the output layer is tied, the vocabulary's rows) of a
    Llama config.json; ValueError naming a setting seqjax has no counterpart for."""
    if hf.get("attention_bias", False) != hf.get("mlp_bias", False):
        raise ValueError(
            f"Llama attention_bias={hf.get('attention_bias')} with mlp_bias={hf.get('mlp_bias')} has no counterpart: "
            "seqjax's model.bias gives both or neither"
        )
    return decoder_config(hf, "Llama", bias=bool(hf.get("attention_bias", False)))


def decoder_config(hf: dict[str, Any], family: str, **options: Any) -> tuple[ModelConfig, bool, int]:
    """`model_config` of the families built as Llama (Qwen2, Mistral), `options` their own model
    settings (biases, window)."""
    d_model, heads = hf.get("hidden_size", 4096), hf.get("num_attention_heads", 32)
    kv_heads = hf.get("num_key_value_heads") or heads
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(
            f"{family} hidden_act={hf['hidden_act']!r} has no counterpart: seqjax's SwiGLU gates with silu"
        )
    head_dim = hf.get("head_dim") or d_model // heads
    cfg = twin_config(
        SETTINGS,
        d_model=d_model,
        layers=hf.get("num_hidden_layers", 32),
        num_heads=heads,
        d_ff=hf.get("intermediate_size", 11008),
        **_rope(hf),
        max_len=hf.get("max_position_embeddings", 2048),
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        kv_heads=0 if kv_heads == heads else kv_heads,
        head_dim=0 if head_dim * heads == d_model else head_dim,
        **options,
    )
    return cfg, bool(hf.get("tie_word_embeddings", False)), hf.get("vocab_size", 32000)


def differences(cfg: ModelConfig) -> list[str]:
    """What keeps `cfg` from being a Llama (`key=value, Llama has X`), empty for a twin."""
    return unmet_settings(cfg, SETTINGS, "Llama")


def hf_config(cfg: ModelConfig, rows: int, tied: bool) -> dict[str, Any]:
    """config.json of the Llama twin of `cfg` (no `differences`)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": rows,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.kv_heads or cfg.num_heads,
        "head_dim": cfg.head_width,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_len,
        "rms_norm_eps": cfg.norm_eps,
        **_rope_config(cfg),
        "attention_bias": cfg.bias,
        "mlp_bias": cfg.bias,
        "attention_dropout": 0.0,
        "tie_word_embeddings": tied,
    }


def canonical(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The tensors without stored rotary frequencies."""
    return {name: value for name, value in tensors.items() if not name.endswith(BUFFERS)}


def table(cfg: ModelConfig, rows: int, tied: bool) -> list[Tensor]:
    """Every tensor of the Llama twin of `cfg` with its place among seqjax's parameters."""
    d, f = cfg.d_model, cfg.d_ff
    h, k = cfg.num_heads, cfg.kv_heads or cfg.num_heads
    dh = cfg.head_width
    out = [
        vocabulary_table("model.embed_tokens.weight", (rows, d), ("model", "embed", "embedding")),
        reshaped("model.norm.weight", (d,), ("model", "final_norm", "scale"), (d,)),
    ]
    if not tied:
        out.append(vocabulary_table("lm_head.weight", (rows, d), ("head", "weights")))
    for i in range(cfg.layers):
        hf, block = f"model.layers.{i}.", ("model", f"blocks_{i}")
        attention = (*block, "self_attention")
        places: dict[str, tuple[Path, tuple[int, int] | None, tuple[int, int] | None]]
        if k == h:  # one fused [D, 3, H, Dh] kernel (and [3, H, Dh] bias)
            places = {name: ((*attention, "qkv"), (index, 1), (index, 0)) for index, name in enumerate("qkv")}
        else:
            places = {"q": ((*attention, "query"), None, None)}
            places |= {name: ((*attention, "kv"), (index, 1), (index, 0)) for index, name in enumerate("kv")}
        for name, width in (("q", h), ("k", k), ("v", k)):
            path, kernel_part, bias_part = places[name]
            out.append(
                linear(
                    f"{hf}self_attn.{name}_proj.weight", (width * dh, d), (*path, "kernel"), (d, width, dh), kernel_part
                )
            )
            if cfg.bias or cfg.qkv_bias:
                out.append(
                    reshaped(f"{hf}self_attn.{name}_proj.bias", (width * dh,), (*path, "bias"), (width, dh), bias_part)
                )
        if cfg.qk_norm:
            for name, ours in (("q", "query_norm"), ("k", "key_norm")):
                out.append(reshaped(f"{hf}self_attn.{name}_norm.weight", (dh,), (*attention, ours, "scale"), (dh,)))
        out.append(linear(hf + "self_attn.o_proj.weight", (d, h * dh), (*attention, "out", "kernel"), (h, dh, d)))
        if cfg.bias:
            out.append(reshaped(hf + "self_attn.o_proj.bias", (d,), (*attention, "out", "bias"), (d,)))
        for hf_name, ours, shape in (
            ("gate_proj", "ff_gate", (f, d)),
            ("up_proj", "ff_in", (f, d)),
            ("down_proj", "ff_out", (d, f)),
        ):
            out.append(linear(f"{hf}mlp.{hf_name}.weight", shape, (*block, ours, "kernel"), shape[::-1]))
            if cfg.bias:
                out.append(reshaped(f"{hf}mlp.{hf_name}.bias", (shape[0],), (*block, ours, "bias"), (shape[0],)))
        out += [
            reshaped(hf + "input_layernorm.weight", (d,), (*block, "self_norm", "scale"), (d,)),
            reshaped(hf + "post_attention_layernorm.weight", (d,), (*block, "ff_norm", "scale"), (d,)),
        ]
    return out
