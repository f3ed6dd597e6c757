"""Mistral (`transformers`' `MistralForCausalLM`) as seqjax's modern Transformer LM, both ways:
Llama's layout and table (llama.py), no biases, and attention over a sliding window.

transformers' sliding window lets the query at position q see the keys at q - `sliding_window`
+ 1 .. q (`sliding_window_overlay`: kv > q - sliding_window), the query's own among them; seqjax's
model.window counts keys the same way (distance < window, model.dilation 1), so `sliding_window`
is model.window as it is. A null `sliding_window` (Mistral 7B v0.2 and later) is full attention
(window 0), which exports as a Llama.
"""

from __future__ import annotations

from typing import Any

from seqjax.config import ModelConfig
from seqjax.pretrained import llama
from seqjax.pretrained.twins import Settings, unmet_settings

NAME = "mistral"
MODEL_TYPES = ("mistral",)
SETTINGS: Settings = llama.SETTINGS | {
    "bias": (False, "no biases"),
    "dilation": (1, "a sliding window without gaps"),
}
canonical = llama.canonical
table = llama.table


def model_config(hf: dict[str, Any]) -> tuple[ModelConfig, bool, int]:
    """(seqjax's model config, whether the output layer is tied, the vocabulary's rows) of a
    Mistral config.json; ValueError naming a setting seqjax has no counterpart for."""
    return llama.decoder_config(hf, "Mistral", bias=False, window=hf.get("sliding_window") or 0)


def differences(cfg: ModelConfig) -> list[str]:
    """What keeps `cfg` from being a Mistral (`key=value, Mistral has X`), empty for a twin: any
    window but 0, which is a Llama's."""
    out = unmet_settings(cfg, SETTINGS | {"window": (cfg.window, "a sliding window")}, "Mistral")
    if cfg.window == 0:
        out.append("model.window=0, Mistral has a sliding window (full attention exports as Llama)")
    return out


def hf_config(cfg: ModelConfig, rows: int, tied: bool) -> dict[str, Any]:
    """config.json of the Mistral twin of `cfg` (no `differences`)."""
    config = {key: value for key, value in llama.hf_config(cfg, rows, tied).items() if not key.endswith("_bias")}
    return config | {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": cfg.window}
