"""Qwen2 and Qwen2.5 (`transformers`' `Qwen2ForCausalLM`) as seqjax's modern Transformer LM, both
ways: Llama's layout and table (llama.py) with biases on q_proj, k_proj and v_proj but not on
o_proj nor the MLP (model.qkv_bias=true, model.bias=false). Qwen2's sliding window
(`use_sliding_window`, on the layers from `max_window_layers` up) has no counterpart.
"""

from __future__ import annotations

from typing import Any

from seqjax.config import ModelConfig
from seqjax.pretrained import llama
from seqjax.pretrained.twins import Settings, unmet_settings

NAME = "qwen2"
MODEL_TYPES = ("qwen2",)
SETTINGS: Settings = llama.SETTINGS | {
    "qkv_bias": (True, "q, k and v biases"),
    "bias": (False, "no output or MLP biases"),
}
canonical = llama.canonical
table = llama.table


def model_config(hf: dict[str, Any]) -> tuple[ModelConfig, bool, int]:
    """(seqjax's model config, whether the output layer is tied, the vocabulary's rows) of a
    Qwen2 config.json; ValueError naming a setting seqjax has no counterpart for."""
    if hf.get("use_sliding_window", False):
        raise ValueError(
            "Qwen2 use_sliding_window=true has no counterpart: seqjax's model.window is the same in every layer"
        )
    return llama.decoder_config(hf, "Qwen2", bias=False, qkv_bias=True)


def differences(cfg: ModelConfig) -> list[str]:
    """What keeps `cfg` from being a Qwen2 (`key=value, Qwen2 has X`), empty for a twin."""
    return unmet_settings(cfg, SETTINGS, "Qwen2")


def hf_config(cfg: ModelConfig, rows: int, tied: bool) -> dict[str, Any]:
    """config.json of the Qwen2 twin of `cfg` (no `differences`)."""
    config = {key: value for key, value in llama.hf_config(cfg, rows, tied).items() if not key.endswith("_bias")}
    return config | {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "use_sliding_window": False}
