"""The kinds of model and head: each kind's name, written once, with the families of options it
reads and the dataclass of its own options.

These tables sit below both the config and the code. The config derives from them the choices
of `model.kind` and `head.kind`, their `--help` and `seqjax config` text, which flat options
apply to which kinds (an option of the family "recurrent" applies to every kind that reads it)
and the section's option groups (`model.rnn_vae.latent_size`: the group of each kind that has
options of its own, applying to that kind only). The
code registries (`seqjax.models.MODEL_KINDS`, `seqjax.heads.build.HEAD_BUILDERS`) map each name
to its class or builder; a test keeps them equal to these names. A kind added at run time
(`seqjax.models.register_model`, `seqjax.heads.build.register_head`) joins a table here, so that
validation, the config text, its group of options and the builders all see it.

A line here names a kind's options class but not its code: the options sit below the config as
this table does, while the code sits above it, and naming it here (by a "module:attribute"
string, resolved lazily) would make this bottom layer know the top layer's layout and move an
import error from the registry's line, where mypy and the import check it, to its first lookup.
A built-in kind therefore costs one line in its registry beside its line here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import NamedTuple

from seqjax import head_options as head
from seqjax import model_options as model


class Family:
    """The kinds of a table that read one family of options, a live view: a kind added to the
    table later is in it when it reads the family."""

    def __init__(self, table: Kinds, family: str) -> None:
        self._table = table
        self._family = family

    def _names(self) -> tuple[str, ...]:
        return tuple(name for name, families in self._table.families.items() if self._family in families)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"{self._family}: {', '.join(self)}"


class Kind(NamedTuple):
    """One kind's declaration: the families of its section's flat options it reads, and the
    frozen dataclass of the options only it reads (None: it has none), its section's group
    named for the kind."""

    families: tuple[str, ...] = ()
    options: type | None = None


class Kinds:
    """The names one section's `kind` may take, in declaration order, each with the families of
    options it reads and its own options. Iterating gives the names; `reading(family)` the kinds
    that read a family; `options` the kinds that have options of their own, with their classes."""

    def __init__(self, section: str, declared: dict[str, Kind]) -> None:
        self.section = section
        self.declared = dict(declared)

    def add(self, name: str, families: tuple[str, ...] = (), options: type | None = None) -> None:
        """Registers kind `name`, reading `families` and its own `options` (a frozen dataclass
        whose defaults construct, or None); refuses a name already taken."""
        if not name.isidentifier():
            raise ValueError(f"{self.section}.kind must be a Python identifier, got {name!r}")
        if name in self.declared:
            raise ValueError(f"{self.section}.kind {name!r} is already registered")
        if options is not None and not dataclasses.is_dataclass(options):
            raise ValueError(f"{self.section}.kind {name!r}: options must be a dataclass, got {options!r}")
        if options is not None and options in self.options.values():
            raise ValueError(f"{self.section}.kind {name!r}: {options.__name__} are another kind's options")
        self.declared[name] = Kind(tuple(families), options)

    @property
    def families(self) -> dict[str, tuple[str, ...]]:
        return {name: kind.families for name, kind in self.declared.items()}

    @property
    def options(self) -> dict[str, type]:
        """kind -> the class of its own options, for the kinds that have some, in order."""
        return {name: kind.options for name, kind in self.declared.items() if kind.options is not None}

    def reading(self, family: str) -> Family:
        return Family(self, family)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self.declared))

    def __contains__(self, name: object) -> bool:
        return name in self.declared

    def __len__(self) -> int:
        return len(self.declared)

    def __repr__(self) -> str:
        return " | ".join(self)


# model.kind -> the families of `ModelConfig` options it reads:
#   neural: d_model, layers, dropout (every model trained by gradient steps)
#   recurrent: the cell and residual connections of RNN layers
#   rnn_encoder: a bidirectional RNN encoder
#   attention: the Transformer blocks (heads, feed-forward, positions, norms, kernels)
#   causal_attention: causal self-attention, with its sliding window and packed segments
#   encoder_only: encoders without a decode step, pre-trained by masked-token objectives
#   context: a fixed window of previous tokens
# The options only one kind reads are its own (`seqjax.model_options`), a group named for it.
MODELS = Kinds(
    "model",
    {
        "rnn": Kind(("neural", "recurrent")),
        "rnn_vae": Kind(("neural", "recurrent"), model.RNNVAEOptions),
        "bilm": Kind(("neural", "recurrent")),
        "transformer": Kind(("neural", "attention", "causal_attention")),
        "nnlm": Kind(("neural", "context"), model.NNLMOptions),
        "ngram": Kind(("context",)),
        "rnn_seq2seq": Kind(("neural", "recurrent", "rnn_encoder")),
        "attention_seq2seq": Kind(("neural", "recurrent", "rnn_encoder"), model.AttentionSeq2SeqOptions),
        "transformer_seq2seq": Kind(("neural", "attention", "causal_attention")),
        "transformer_encoder": Kind(("neural", "attention", "encoder_only")),
        "electra": Kind(("neural", "attention", "encoder_only"), model.ElectraModelOptions),
    },
)

# head.kind -> the families of `HeadConfig` options it reads:
#   tied: output rows that are words, so they can share the input embedding
#   word_bias: a bias per word, trained or frozen
#   sampling: K negatives drawn from a proposal per step
# The options only one kind reads are its own (`seqjax.head_options`), a group named for it.
HEADS = Kinds(
    "head",
    {
        "full": Kind(("tied", "word_bias"), head.FullOptions),
        "sampled": Kind(("tied", "word_bias", "sampling"), head.SampledOptions),
        "nce": Kind(("tied", "word_bias", "sampling"), head.NCEOptions),
        "negative": Kind(("tied", "word_bias", "sampling")),
        "class": Kind(("tied",), head.ClassOptions),
        "tree": Kind((), head.TreeOptions),
        "adaptive": Kind(("tied",), head.AdaptiveOptions),
    },
)
