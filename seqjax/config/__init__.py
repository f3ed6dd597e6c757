"""Typed experiment configuration, one package: the sections (one frozen dataclass per concern,
composed once as `Config`), the registries of kinds (`kinds`: each kind registers its name, options
and builder with one call in its own module), `--set` overrides checked on the host (`overrides`),
the saved form and its migrations (`saved`, `migrations`), the config as text (`text`) and the
files `--config` reads (`files`).

An experiment file defines `get_config() -> Config`; the CLI applies `--set a.b=c` overrides on top
with `override`. A key set explicitly for a kind that is not the resolved one is refused: it would
be ignored; an old key is refused with its new name, and a saved config still reads moved keys.
"""

from seqjax.config.fields import Options, OrAuto, applies_to, choices, describe, option
from seqjax.config.groups import KindSection, member_types, members
from seqjax.config.kinds import ATTENTION_KERNELS, DATA_FORMATS, HEADS, MODELS, OBJECTIVES, OPTIMIZERS
from seqjax.config.migrations import MOVED, RENAMED
from seqjax.config.overrides import check_choices, coerce, inapplicable, override, unknown_key, valid_keys
from seqjax.config.registry import Kind, Registry
from seqjax.config.saved import dumps, from_dict, to_dict
from seqjax.config.sections import (
    ATTENTION,
    BIASED_HEADS,
    CONTEXT,
    ENCODERS,
    NEURAL,
    RECURRENT,
    RNN_ENCODERS,
    SAMPLING_HEADS,
    TIED_HEADS,
    TRANSFORMERS,
    Config,
    DataConfig,
    HeadConfig,
    ModelConfig,
    ObjectiveConfig,
    OptimConfig,
    TrainConfig,
)

__all__ = [
    "ATTENTION",
    "ATTENTION_KERNELS",
    "BIASED_HEADS",
    "CONTEXT",
    "Config",
    "DATA_FORMATS",
    "DataConfig",
    "ENCODERS",
    "HEADS",
    "HeadConfig",
    "Kind",
    "KindSection",
    "MODELS",
    "MOVED",
    "ModelConfig",
    "NEURAL",
    "OBJECTIVES",
    "OPTIMIZERS",
    "ObjectiveConfig",
    "OptimConfig",
    "Options",
    "OrAuto",
    "RECURRENT",
    "RENAMED",
    "RNN_ENCODERS",
    "Registry",
    "SAMPLING_HEADS",
    "TIED_HEADS",
    "TRANSFORMERS",
    "TrainConfig",
    "applies_to",
    "check_choices",
    "choices",
    "coerce",
    "describe",
    "dumps",
    "from_dict",
    "inapplicable",
    "member_types",
    "members",
    "option",
    "override",
    "to_dict",
    "unknown_key",
    "valid_keys",
]
