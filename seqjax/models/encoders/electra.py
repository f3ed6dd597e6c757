"""ELECTRA (Clark et al. 2020, model.kind=electra): the discriminator, whose `__call__` is the
encoder a fine-tuning run would reuse, plus a small generator (`model.electra.generator_layers`
blocks, `model.electra.generator_width` of the discriminator's width, sharing the token embedding
through a projection in and out when narrower) and the replaced-token classifier `discriminate`
(`seqjax.objectives.Electra`). Both encoders read tokens as `TransformerEncoder` does, [MASK] = V
included, and neither has a decode step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

from seqjax.checks import integer, number
from seqjax.config import MODELS, Options, option
from seqjax.models.base import dense_axes
from seqjax.models.encoders.transformer import EncoderStack, TransformerEncoder


def generator_config(cfg: Any) -> Any:
    """The generator's blocks as a config: `model.electra.generator_layers` of them, d_model, d_ff and
    the (key/value) heads scaled by `model.electra.generator_width` (heads rounded down, at least one).

    Raises:
      ValueError: a width outside (0, 1], or one that gives no whole d_model divisible by the heads.
    """
    width = cfg.options_of(ElectraModelOptions).generator_width
    d_model = cfg.d_model * width if isinstance(width, (int, float)) and not isinstance(width, bool) else 0.0
    if not 0 < width <= 1 or abs(d_model - round(d_model)) > 1e-6:
        raise ValueError(
            f"model.electra.generator_width must be in (0, 1] with model.d_model={cfg.d_model} times it a whole "
            f"number, got {width!r}"
        )
    heads = max(1, int(cfg.num_heads * width))
    kv_heads = max(1, int(cfg.kv_heads * width)) if cfg.kv_heads else 0
    head_width = round(d_model) // heads
    if round(d_model) % heads or (kv_heads and heads % kv_heads) or (cfg.positions == "rope" and head_width % 2):
        raise ValueError(
            f"model.electra.generator_width={width} gives a generator of d_model {round(d_model)}, {heads} heads and "
            f"{kv_heads or heads} key/value heads: d_model must divide into the heads (of even width for rope) "
            "and they into groups"
        )
    return dataclasses.replace(
        cfg,
        layers=cfg.options_of(ElectraModelOptions).generator_layers,
        d_model=round(d_model),
        num_heads=heads,
        kv_heads=kv_heads,
        d_ff=max(1, round(cfg.d_ff * width)),
    )


@dataclasses.dataclass(frozen=True)
class ElectraModelOptions(Options):
    """ELECTRA's generator, as a fraction of the discriminator (whose size the flat options give)."""

    generator_layers: int = option(1, "blocks of the generator (the discriminator has model.layers)", check=integer())
    generator_width: float = option(
        1.0,
        "the generator's d_model, d_ff and heads as a fraction of the discriminator's, in (0, 1] "
        "(Clark et al.: 1/4 to 1/2)",
        check=number(0.0, 1.0, open_low=True),
    )


class ElectraEncoder(TransformerEncoder):
    """ELECTRA (Clark et al. 2020): the discriminator encoder (`__call__`, cfg.layers blocks)
    and a generator (`generator_config`) over the same token embedding; a narrower generator
    reads the embedding through a linear map to its width and maps its output back to D, where
    the shared head scores it."""

    objective: ClassVar[str] = "electra"

    @staticmethod
    def check_config(cfg: Any) -> None:
        """Raises ValueError for generator options that give no generator (`generator_config`)."""
        generator_config(cfg)

    def setup(self) -> None:
        super().setup()
        generator = generator_config(self.cfg)
        self.generator_stack = EncoderStack(generator, self.dtype, kernel_choice=self.kernel_choice)
        if generator.d_model != self.cfg.d_model:
            axes = dense_axes(("embed", "features"))
            self.generator_in = nn.Dense(generator.d_model, dtype=self.dtype, name="generator_in", **axes)
            self.generator_out = nn.Dense(self.cfg.d_model, dtype=self.dtype, name="generator_out", **axes)
        self.classifier = nn.Dense(1, dtype=self.dtype, name="classifier", **dense_axes(("embed", "features")))

    def packed_hidden_states(
        self, x: Array, mask: Array | None, positions: Array, segment_ids: Array | None, train: bool
    ) -> Array:
        """The discriminator's hidden states [B, T, D] float32 (as `TransformerEncoder`)."""
        hidden = super().packed_hidden_states(x, mask, positions, segment_ids, train)
        if self.is_initializing():  # one init creates the generator and the classifier too
            self._generate(x, mask, train)
            self.classifier(hidden)
        return hidden

    def generator(self, tokens: Array, *, mask: Array | None = None, train: bool = False) -> Array:
        """The generator's hidden states [B, T, D] float32 for tokens [B, T] int32 (the head
        turns them into its masked-LM distribution)."""
        return self._generate(self.embedded_targets(tokens, mask, None, self.cfg.max_len), mask, train)

    def _generate(self, x: Array, mask: Array | None, train: bool) -> Array:
        """The generator over lookups x [B, T, D] float32 -> [B, T, D] float32; a narrower one
        reads them through `generator_in` and maps its output back through `generator_out`."""
        positions = jnp.arange(x.shape[1], dtype=jnp.int32)
        if self.cfg.options_of(ElectraModelOptions).generator_width == 1:
            return self.generator_stack(x, mask, positions, None, train)
        hidden = self.generator_stack(self.generator_in(x), mask, positions, None, train)
        return self.generator_out(hidden).astype(jnp.float32)

    def discriminate(self, tokens: Array, *, mask: Array | None = None, train: bool = False) -> Array:
        """Replaced-token logits [B, T] float32: log-odds that each token is not the original."""
        hidden = self(tokens, mask=mask, train=train)
        return self.classifier(hidden).astype(jnp.float32)[..., 0]


MODELS.register(
    "electra", ElectraEncoder, options=ElectraModelOptions, families=("neural", "attention", "encoder_only")
)
