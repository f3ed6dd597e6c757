"""Qwen3 (`transformers`' `Qwen3ForCausalLM`) as seqjax's modern Transformer LM, both ways:
Llama's layout and table (llama.py) with an RMSNorm of each query and key head before the
rotary turn (`q_norm`, `k_norm`: a weight [Dh] each, epsilon `rms_norm_eps`; model.qk_norm),
no biases, and heads `head_dim` wide. `attention_bias=true` (biases on q, k, v and o but not
the MLP) and `use_sliding_window=true` have no counterpart.
"""

from __future__ import annotations

from typing import Any

from seqjax.config import ModelConfig
from seqjax.pretrained import llama
from seqjax.pretrained.twins import Settings, unmet_settings

NAME = "qwen3"
MODEL_TYPES = ("qwen3",)
SETTINGS: Settings = llama.SETTINGS | {"qk_norm": (True, "query and key RMSNorms"), "bias": (False, "no biases")}
canonical = llama.canonical
table = llama.table


def model_config(hf: dict[str, Any]) -> tuple[ModelConfig, bool, int]:
    """(seqjax's model config, whether the output layer is tied, the vocabulary's rows) of a
    Qwen3 config.json; ValueError naming a setting seqjax has no counterpart for."""
    for key, what in (("attention_bias", "model.bias gives the MLP biases too"), ("use_sliding_window", "")):
        if hf.get(key, False):
            rule = what or "seqjax's model.window is the same in every layer"
            raise ValueError(f"Qwen3 {key}=true has no counterpart: {rule}")
    return llama.decoder_config(hf, "Qwen3", bias=False, qk_norm=True)


def differences(cfg: ModelConfig) -> list[str]:
    """What keeps `cfg` from being a Qwen3 (`key=value, Qwen3 has X`), empty for a twin."""
    return unmet_settings(cfg, SETTINGS, "Qwen3")


def hf_config(cfg: ModelConfig, rows: int, tied: bool) -> dict[str, Any]:
    """config.json of the Qwen3 twin of `cfg` (no `differences`)."""
    config = {key: value for key, value in llama.hf_config(cfg, rows, tied).items() if key != "mlp_bias"}
    return config | {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "use_sliding_window": False}
