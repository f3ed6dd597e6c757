"""The model settings a family's Hugging Face twin must have, and what keeps a run's model from them."""

from __future__ import annotations

from typing import Any

from seqjax.config import ModelConfig

Settings = dict[str, tuple[Any, str]]  # ModelConfig field -> (the twin's value, how a message names it)

# Every family here is a pre-norm Transformer LM with unscaled embeddings and, unless its own
# settings say otherwise, full causal attention and no biases apart from model.bias's.
TRANSFORMER_LM: Settings = {
    "norm": ("pre", "pre-norm blocks"),
    "scale_embeddings": (False, "unscaled embeddings"),
    "window": (0, "full causal attention"),
    "qkv_bias": (False, "no q, k, v biases apart from model.bias"),
    "qk_norm": (False, "no query and key norms"),
}


def unmet_settings(cfg: ModelConfig, settings: Settings, family: str) -> list[str]:
    """`model.key=value, <family> has <what>` for each of `settings` and of the TRANSFORMER_LM
    ones `settings` leaves out, that `cfg` does not have; empty when it has them all."""
    shared = {key: setting for key, setting in TRANSFORMER_LM.items() if key not in settings}
    return [
        f"model.{key}={getattr(cfg, key)!r}, {family} has {what}"
        for key, (value, what) in (settings | shared).items()
        if getattr(cfg, key) != value
    ]


def twin_config(settings: Settings, **read: Any) -> ModelConfig:
    """The model config of a checkpoint of the family with `settings`: a Transformer LM without
    dropout that has `settings` and the TRANSFORMER_LM ones, and what its config.json says
    (`read`, which wins)."""
    fixed = {key: value for key, (value, _) in (TRANSFORMER_LM | settings).items()}
    return ModelConfig(kind="transformer", dropout=0.0, **(fixed | read))
