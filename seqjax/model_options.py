"""The options only one model kind reads: one frozen dataclass per such kind, checked when it is
built, and held by `ModelConfig` as a group named for the kind (`model.rnn_vae.latent_size`).

These sit below both the config and the models (as `seqjax.objective_config` does for the
objectives): `seqjax.kinds` names each kind's options class, so the config does not import the
code it configures. A group's checks raise `ValueError` naming the option by its name in the
group; the config prefixes the group's path. Options a family of kinds reads (`model.d_model`,
`model.num_heads`, ...) stay flat in `ModelConfig`.
"""

from __future__ import annotations

import dataclasses

from seqjax.objective_config import check_int, check_number, check_one_of
from seqjax.options import option

ATTENTION_SCORES = ("additive", "dot", "general")


@dataclasses.dataclass(frozen=True)
class RNNVAEOptions:
    """The VAE LM's latent: its size and where the decoder reads it."""

    latent_size: int = option(32, "dimensions Z of the latent z")
    feed_latent: bool = option(
        False, "z is also concatenated to every decoder input (else it only sets the initial carries)"
    )

    def __post_init__(self) -> None:
        check_int("latent_size", self.latent_size, 1)


@dataclasses.dataclass(frozen=True)
class ElectraModelOptions:
    """ELECTRA's generator, as a fraction of the discriminator (whose size the flat options give)."""

    generator_layers: int = option(1, "blocks of the generator (the discriminator has model.layers)")
    generator_width: float = option(
        1.0,
        "the generator's d_model, d_ff and heads as a fraction of the discriminator's, in (0, 1] "
        "(Clark et al.: 1/4 to 1/2)",
    )

    def __post_init__(self) -> None:
        check_int("generator_layers", self.generator_layers, 1)
        check_number("generator_width", self.generator_width, 0.0, 1.0, open_low=True)


@dataclasses.dataclass(frozen=True)
class NNLMOptions:
    """Bengio's feed-forward LM's direct connections."""

    direct: bool = option(False, "direct (linear) connections from the context to the output")


@dataclasses.dataclass(frozen=True)
class AttentionSeq2SeqOptions:
    """The RNN encoder-decoder's attention score."""

    attention: str = option("additive", "attention score: " + " | ".join(ATTENTION_SCORES), choices=ATTENTION_SCORES)

    def __post_init__(self) -> None:
        check_one_of("attention", self.attention, ATTENTION_SCORES)
