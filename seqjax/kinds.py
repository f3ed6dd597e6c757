"""The kinds of model and head: each kind's name, written once, with the families of options it reads.

These tables sit below both the config and the code. The config derives from them the choices
of `model.kind` and `head.kind`, their `--help` and `seqjax config` text, and which options apply
to which kinds (an option of the family "recurrent" applies to every kind that reads it). The
code registries (`seqjax.models.MODEL_KINDS`, `seqjax.heads.build.HEAD_BUILDERS`) map each name
to its class or builder; a test keeps them equal to these names. A kind added at run time
(`seqjax.models.register_model`, `seqjax.heads.build.register_head`) joins a table here, so that
validation, the config text and the builders all see it.
"""

from __future__ import annotations

from collections.abc import Iterator


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


class Kinds:
    """The names one section's `kind` may take, in declaration order, each with the families of
    options it reads. Iterating gives the names; `reading(family)` the kinds that read a family."""

    def __init__(self, section: str, families: dict[str, tuple[str, ...]]) -> None:
        self.section = section
        self.families = dict(families)

    def add(self, name: str, families: tuple[str, ...] = ()) -> None:
        """Registers kind `name`, reading `families`; refuses a name already taken."""
        if not name or not name.isidentifier():
            raise ValueError(f"{self.section}.kind must be a Python identifier, got {name!r}")
        if name in self.families:
            raise ValueError(f"{self.section}.kind {name!r} is already registered")
        self.families[name] = tuple(families)

    def reading(self, family: str) -> Family:
        return Family(self, family)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self.families))

    def __contains__(self, name: object) -> bool:
        return name in self.families

    def __len__(self) -> int:
        return len(self.families)

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
# An option only one kind reads names that kind itself (`kinds=("rnn_vae",)`).
MODELS = Kinds(
    "model",
    {
        "rnn": ("neural", "recurrent"),
        "rnn_vae": ("neural", "recurrent"),
        "bilm": ("neural", "recurrent"),
        "transformer": ("neural", "attention", "causal_attention"),
        "nnlm": ("neural", "context"),
        "ngram": ("context",),
        "rnn_seq2seq": ("neural", "recurrent", "rnn_encoder"),
        "attention_seq2seq": ("neural", "recurrent", "rnn_encoder"),
        "transformer_seq2seq": ("neural", "attention", "causal_attention"),
        "transformer_encoder": ("neural", "attention", "encoder_only"),
        "electra": ("neural", "attention", "encoder_only"),
    },
)

# head.kind -> the families of `HeadConfig` options it reads:
#   tied: output rows that are words, so they can share the input embedding
#   word_bias: a bias per word, trained or frozen
#   sampling: K negatives drawn from a proposal per step
HEADS = Kinds(
    "head",
    {
        "full": ("tied", "word_bias"),
        "sampled": ("tied", "word_bias", "sampling"),
        "nce": ("tied", "word_bias", "sampling"),
        "negative": ("tied", "word_bias", "sampling"),
        "class": ("tied",),
        "tree": (),
        "adaptive": ("tied",),
    },
)
