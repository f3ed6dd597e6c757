"""The model settings a family's Hugging Face twin must have, and what keeps a run's model from them."""

from __future__ import annotations

from typing import Any

from seqjax.config import ModelConfig

Settings = dict[str, tuple[Any, str]]  # ModelConfig field -> (the twin's value, how a message names it)

# Every family here is a pre-norm Transformer LM with unscaled embeddings and full causal attention.
TRANSFORMER_LM: Settings = {
    "norm": ("pre", "pre-norm blocks"),
    "scale_embeddings": (False, "unscaled embeddings"),
    "window": (0, "full causal attention"),
}


def unmet_settings(cfg: ModelConfig, settings: Settings, family: str) -> list[str]:
    """`model.key=value, <family> has <what>` for each of `settings`, then of TRANSFORMER_LM,
    that `cfg` does not have; empty when it has them all."""
    return [
        f"model.{key}={getattr(cfg, key)!r}, {family} has {what}"
        for key, (value, what) in {**settings, **TRANSFORMER_LM}.items()
        if getattr(cfg, key) != value
    ]
