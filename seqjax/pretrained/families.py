"""The model families with a Hugging Face twin, and how a checkpoint or a run is matched to one."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from seqjax.config import Config
from seqjax.pretrained import gpt2, llama, mistral, qwen2, qwen3

FAMILIES: dict[str, ModuleType] = {family.NAME: family for family in (gpt2, llama, qwen2, qwen3, mistral)}
# Heads whose exact log-probabilities are the softmax of h·w + b, as a pretrained output layer's.
SOFTMAX_HEADS = ("full", "sampled", "nce")


def family_of_checkpoint(config: dict[str, Any]) -> ModuleType:
    """The family of a checkpoint's config.json (by `model_type`), or ValueError listing them."""
    model_type = config.get("model_type")
    for family in FAMILIES.values():
        if model_type in family.MODEL_TYPES:
            return family
    supported = sorted(t for family in FAMILIES.values() for t in family.MODEL_TYPES)
    raise ValueError(f"config.json model_type={model_type!r} is not supported; supported: {', '.join(supported)}")


def twin_of_run(cfg: Config) -> ModuleType:
    """The family whose twin `cfg`'s model and head are, or ValueError saying what differs from each."""
    if cfg.model.kind != "transformer":
        raise ValueError(f"model.kind={cfg.model.kind!r} has no Hugging Face twin: only a transformer LM has")
    if cfg.head.kind not in SOFTMAX_HEADS:
        raise ValueError(
            f"head.kind={cfg.head.kind!r} has no Hugging Face twin: a pretrained LM's output layer is a softmax "
            f"over h·w (heads {', '.join(SOFTMAX_HEADS)} score so)"
        )
    differences = {name: family.differences(cfg.model) for name, family in FAMILIES.items()}
    for name, found in differences.items():
        if not found:
            return FAMILIES[name]
    raise ValueError(
        "the run has no Hugging Face twin: " + "; ".join(f"as {n}: {', '.join(d)}" for n, d in differences.items())
    )
