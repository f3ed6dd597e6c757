"""What a model kind's registered class says of it (`MODELS.register` in the kind's module): its
class, whether it reads a source, has a latent variable, decodes, is trained by gradient steps, and
the kinds that share such a fact — read from the registry, so a kind registered later is included."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import flax.linen as nn

from seqjax.config import ATTENTION, ENCODERS, MODELS, TRANSFORMERS, ModelConfig


def model_class(cfg: ModelConfig) -> Any:
    """The class registered for `cfg.kind` (its class facts: `has_encoder`, `recurrent`, ...)."""
    return MODELS[cfg.kind].build


class _ClassFacts(Mapping[str, Any]):
    """kind -> the value of `fact` on its registered class, for the kinds whose class states it (a
    true value): a live view, so that a kind registered later is in it."""

    def __init__(self, fact: str) -> None:
        self._fact = fact

    def _table(self) -> dict[str, Any]:
        stated = {kind.name: getattr(kind.build, self._fact, None) for kind in MODELS.kinds()}
        return {kind: value for kind, value in stated.items() if value}

    def __getitem__(self, kind: str) -> Any:
        return self._table()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


# kind -> the one objective that trains it, for models whose parts only that objective reaches
MODEL_OBJECTIVES = _ClassFacts("objective")
SEQ2SEQ_KINDS = _ClassFacts("has_encoder")  # iterating gives the kinds
TRANSFORMER_KINDS = TRANSFORMERS  # causal self-attention: sliding windows, packed segments
# kind -> its encoder's parts, for the models whose encoder carries over (`Model.encoder_parts`)
ENCODER_PARTS = _ClassFacts("encoder_parts")


def takes_pretrained_encoder(cfg: ModelConfig) -> bool:
    """True for the encoder-decoders whose encoder `train.init_encoder_from` starts from an
    encoder-only run's (they state the parts it carries over)."""
    return cfg.kind in ENCODER_PARTS and is_seq2seq(cfg)


ENCODER_KINDS = ENCODERS  # encoder-only: no decode step


def is_seq2seq(cfg: ModelConfig) -> bool:
    """True for encoder–decoders, whose apply and init_decode_state take src/src_mask."""
    return bool(model_class(cfg).has_encoder)


def is_latent(cfg: ModelConfig) -> bool:
    """True for latent-variable models (the VAE LM), trained by the vae objective and scored
    by their evidence lower bound."""
    return bool(getattr(model_class(cfg), "latent", False))


def generates(cfg: ModelConfig) -> bool:
    """True for the models with a decode step (every kind but the encoder-only ones)."""
    return bool(getattr(model_class(cfg), "generates", True))


def readable_length(cfg: ModelConfig) -> int | None:
    """The longest sequence the model reads: model.max_len for the models with positions up to it
    (those of Transformer blocks), else None (no limit)."""
    return cfg.max_len if cfg.kind in ATTENTION else None


def is_trained(cfg: ModelConfig) -> bool:
    """True for the Linen models trained by gradient steps; False for the counted n-gram."""
    return issubclass(model_class(cfg), nn.Module)
