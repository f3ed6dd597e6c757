"""Positions in a Transformer: Vaswani et al.'s sinusoidal encoding and learned position
embeddings added to the inputs (`PositionalInputs`), and rotary embeddings (`rotary`), which
turn queries and keys inside attention instead."""

from __future__ import annotations

import dataclasses
import functools
import math

import flax.linen as nn
import jax.numpy as jnp
import numpy as np
from jax import Array

from seqjax.config import ModelConfig


def sinusoidal_positions(positions: Array, width: int) -> Array:
    """Vaswani et al.'s encoding: sin on the first half of the features, cos on the second.

    Args:
      positions: [...] int32.
    Returns:
      [..., width] float32.
    """
    frequencies = 10000.0 ** (-jnp.arange(width // 2, dtype=jnp.float32) / (width // 2))
    angles = positions[..., None].astype(jnp.float32) * frequencies
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


@dataclasses.dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3.1's rotary frequencies (`model.rope_scaling=llama3`): those of wavelength over
    `original_max_len / low_freq_factor` divided by `factor`, those under `original_max_len /
    high_freq_factor` kept, those between interpolated (transformers' `_compute_llama3_parameters`)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_len: int


def rope_scaling(cfg: ModelConfig) -> Llama3Scaling | None:
    """The frequency scaling `cfg` asks for, None for unscaled rotary positions."""
    if cfg.rope_scaling == "none":
        return None
    return Llama3Scaling(
        cfg.rope_factor, cfg.rope_low_freq_factor, cfg.rope_high_freq_factor, cfg.rope_original_max_len
    )


def inverse_frequencies(half: int, base: float, scaling: Llama3Scaling | None = None) -> np.ndarray:
    """The angle per position of each pair i of a head: base^(-i/half), scaled; float64 [half]."""
    frequencies: np.ndarray = base ** (-np.arange(half) / half)
    if scaling is None:
        return frequencies
    wavelengths = 2 * math.pi / frequencies
    low, high = scaling.original_max_len / scaling.low_freq_factor, scaling.original_max_len / scaling.high_freq_factor
    smooth = (scaling.original_max_len / wavelengths - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor
    )
    between = (1 - smooth) * frequencies / scaling.factor + smooth * frequencies
    scaled: np.ndarray = np.where(
        wavelengths > low, frequencies / scaling.factor, np.where(wavelengths < high, frequencies, between)
    )
    return scaled


def rotary(x: Array, positions: Array, base: float, max_len: int, scaling: Llama3Scaling | None = None) -> Array:
    """Rotary position embedding (Su et al. 2021): feature i of a head is paired with i + Dh/2
    (the GPT-NeoX / Llama layout) and the pair turned by the angle position · base^(-2i/Dh)
    (`inverse_frequencies`, which `scaling` changes).

    Scores of turned queries and keys depend only on the difference of their positions.

    Args:
      x: [B, T, heads, Dh] queries or keys, Dh even.
      positions: [B, T] or [T] int32, each in [0, max_len).
      max_len: the model's length bound, the size of the cosine and sine tables.
    Returns:
      [B, T, heads, Dh] in x's dtype (the turn is computed in float32).
    """
    half = x.shape[-1] // 2
    cos_table, sin_table = rotary_tables(max_len, half, base, scaling)
    # Read from tables rather than computed in place: XLA fuses cos and sin into each
    # consumer and recomputes them for every element of x (every batch row and head).
    cos, sin = jnp.asarray(cos_table)[positions][..., None, :], jnp.asarray(sin_table)[positions][..., None, :]
    first, second = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    turned = jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    return turned.astype(x.dtype)


@functools.cache
def rotary_tables(
    max_len: int, half: int, base: float, scaling: Llama3Scaling | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position · `inverse_frequencies`: float32 [max_len, half] each, computed in float64."""
    angles = np.arange(max_len)[:, None] * inverse_frequencies(half, base, scaling)
    tables = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    for table in tables:
        table.flags.writeable = False  # shared by every call through the cache
    return tables


class PositionalInputs(nn.Module):
    """Embeddings scaled by √D (unless `cfg.scale_embeddings` is false) plus a position encoding
    (none for rope, which turns queries and keys inside attention instead), then dropout."""

    cfg: ModelConfig

    def setup(self) -> None:
        if self.cfg.positions == "learned":
            init = nn.with_logical_partitioning(nn.initializers.normal(1.0), ("positions", "embed"))
            self.position_embed = nn.Embed(self.cfg.max_len, self.cfg.d_model, embedding_init=init)
        self.dropout = nn.Dropout(self.cfg.dropout)

    def __call__(self, embedded: Array, positions: Array, train: bool = False) -> Array:
        """embedded: [B, T, D] lookups; positions: [B, T] or [T] int32 -> [B, T, D] float32."""
        x = embedded.astype(jnp.float32)
        if self.cfg.scale_embeddings:
            x = x * jnp.sqrt(float(self.cfg.d_model))
        if self.cfg.positions == "learned":
            x = x + self.position_embed(positions)
        elif self.cfg.positions == "sinusoidal":
            x = x + sinusoidal_positions(positions, self.cfg.d_model)
        result: Array = self.dropout(x, deterministic=not train)
        return result
