"""Typed experiment configuration: the sections (`seqjax.config_sections`: one frozen dataclass
per concern, composed once as `Config`) and the code that reads, checks, overrides and saves them.

An experiment file defines `get_config() -> Config`; the CLI applies `--set a.b=c`
overrides on top with `override`, which checks every key and value type on the host. A key set
explicitly for a kind that is not the resolved one is refused: it would be ignored; an old key
is refused with its new name (`RENAMED`, `MOVED`), and a saved config still reads the keys of
`MOVED` (`from_dict`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from typing import Any

from seqjax.config_sections import (
    ATTENTION,
    BIASED_HEADS,
    CELLS,
    CONTEXT,
    DATA_KINDS,
    ENCODERS,
    HEAD_KINDS,
    MODEL_KINDS,
    NEURAL,
    PROPOSALS,
    RECURRENT,
    RNN_ENCODERS,
    SAMPLING_HEADS,
    SYNTHETIC_TASKS,
    TIED_HEADS,
    TOKENIZERS,
    TRANSFORMERS,
    Config,
    DataConfig,
    HeadConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
)
from seqjax.kind_section import KindSection, member_types, members
from seqjax.objective_config import ObjectiveConfig

__all__ = [
    "ATTENTION",
    "BIASED_HEADS",
    "CELLS",
    "CONTEXT",
    "Config",
    "DATA_KINDS",
    "DataConfig",
    "ENCODERS",
    "HEAD_KINDS",
    "HeadConfig",
    "MODEL_KINDS",
    "ModelConfig",
    "ObjectiveConfig",
    "NEURAL",
    "OptimConfig",
    "PROPOSALS",
    "RECURRENT",
    "RNN_ENCODERS",
    "SAMPLING_HEADS",
    "SYNTHETIC_TASKS",
    "TIED_HEADS",
    "TOKENIZERS",
    "TRANSFORMERS",
    "TrainConfig",
    "MOVED",
    "RENAMED",
    "check_choices",
    "dumps",
    "from_dict",
    "inapplicable",
    "override",
    "to_dict",
    "valid_keys",
]


def _coerce(text_or_value: Any, kind: Any, key: str) -> Any:
    """Converts a CLI string (or a JSON value) to the annotated type, or raises ValueError."""
    origin = typing.get_origin(kind)
    if origin is tuple:
        (item,) = {a for a in typing.get_args(kind) if a is not Ellipsis}
        if isinstance(text_or_value, str):
            parts = [p for p in text_or_value.replace("(", "").replace(")", "").split(",") if p.strip()]
        else:
            parts = list(text_or_value)
        return tuple(_coerce(p, item, key) for p in parts)
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"unsupported config type {kind} for {key}")
    value = text_or_value
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            lowered = str(value).strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind is str:
            if not isinstance(value, str):
                raise ValueError
            return value
    except ValueError:
        raise ValueError(f"{key} must be {kind.__name__}, got {value!r}") from None
    raise TypeError(f"unsupported config type {kind} for {key}")


# Keys of earlier versions, refused with the name that replaced them.
RENAMED = {
    "model.heads": "model.num_heads",
    "data.max_len": "data.max_pair_len",
    "train.samples": "train.num_printed_samples",
    "train.sample_len": "train.printed_sample_len",
    # objective options were one flat section; now a group per objective
    "objective.schedule": "objective.scheduled_sampling.schedule",
    "objective.k": "objective.scheduled_sampling.k",
    "objective.c": "objective.scheduled_sampling.c",
    "objective.eps_min": "objective.scheduled_sampling.eps_min",
    "objective.feed": "objective.scheduled_sampling.feed",
    "objective.mode": "objective.scheduled_sampling.mode",
    "objective.passes": "objective.scheduled_sampling.passes",
    "objective.first_pass_grad": "objective.scheduled_sampling.first_pass_grad",
    "objective.sequence_rate": "objective.random_replacement.sequence_rate",
    "objective.token_rate": "objective.random_replacement.token_rate",
    "objective.pool": "objective.random_replacement.pool",
    "objective.penalty": "objective.gradient_penalty.penalty",
    "objective.samples": (
        "objective.reinforce.sequences_per_source (objective.mixer.sequences_per_source, "
        "objective.minimum_risk.num_candidates)"
    ),
    # the sequences REINFORCE samples per source, not a sampling head's head.num_samples
    "objective.reinforce.num_samples": "objective.reinforce.sequences_per_source",
    "objective.mixer.num_samples": "objective.mixer.sequences_per_source",
    "objective.baseline": "objective.reinforce.baseline (or objective.mixer.baseline)",
    "objective.mle_weight": (
        "objective.reinforce.mle_weight (or objective.mixer.mle_weight, objective.minimum_risk.mle_weight)"
    ),
    "objective.delta_start": "objective.mixer.delta_start",
    "objective.delta_growth": "objective.mixer.delta_growth",
    "objective.delta_every": "objective.mixer.delta_every",
    "objective.candidates": "objective.minimum_risk.search",
    "objective.alpha": "objective.minimum_risk.alpha",
}
# The options of one model or head kind were flat in their section; now a group per kind. A
# saved config (`from_dict`) still reads them, moved into their groups; `--set` names the new key.
MOVED = {
    f"{section}.{name}": f"{section}.{kind}.{name}"
    for section, moves in {
        "model": {
            "rnn_vae": ("latent_size", "feed_latent"),
            "electra": ("generator_layers", "generator_width"),
            "nnlm": ("direct",),
            "attention_seq2seq": ("attention",),
        },
        "head": {
            "full": ("chunk_size", "block_residuals", "z_loss"),
            "sampled": ("remove_accidental_hits",),
            "nce": ("log_normalizer", "learn_normalizer"),
            "tree": ("tree",),
            "class": ("num_classes",),
            "adaptive": ("cutoffs", "div_value", "head_bias"),
        },
    }.items()
    for kind, names in moves.items()
    for name in names
}


def valid_keys(node: Any, prefix: str = "") -> list[str]:
    """Every settable `a.b(.c)` key under a config (or a section of one), in declaration order."""
    keys = []
    for name, _, value in members(node):
        if dataclasses.is_dataclass(value):
            keys += valid_keys(value, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _did_you_mean(options: list[str]) -> str:
    return f"; did you mean {' or '.join(options)}?" if options else ""


def _unknown_key(config: Config, key: str) -> ValueError:
    if key in RENAMED:
        return ValueError(f"config key {key!r} was renamed to {RENAMED[key]!r}")
    if key in MOVED:
        return ValueError(f"{key} is now {MOVED[key]}, in the group of the one kind that reads it")
    keys = valid_keys(config)
    # A misspelt key, else the same name elsewhere (model.cutoffs -> head.adaptive.cutoffs).
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.8)
    close = close or [k for k in keys if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
    return ValueError(
        f"unknown config key {key!r}{_did_you_mean(close)} (`seqjax config` lists every key with its description)"
    )


def _choice_hint(node: Any, prefix: str, name: str, value: str, choices: tuple[str, ...]) -> str:
    """' ; did you mean ...?': a close spelling of `value` among `choices`, or, for a `kind`, the
    kind whose option takes `value` (model.kind=lstm -> model.kind=rnn with model.cell=lstm)."""
    close = difflib.get_close_matches(value, choices, n=2, cutoff=0.75)
    if close or name != "kind":
        return _did_you_mean([f"{prefix}{name}={c}" for c in close])
    for member, field, group in members(node):
        if field is not None:
            applies_to = tuple(field.metadata.get("kinds", ()))
            if value in field.metadata.get("choices", ()) and applies_to:
                return _did_you_mean([f"{prefix}kind={applies_to[0]} with {prefix}{member}={value}"])
        elif dataclasses.is_dataclass(group):  # a kind's group: its option that takes `value`
            for option_field in dataclasses.fields(group):
                if value in option_field.metadata.get("choices", ()):
                    return _did_you_mean([f"{prefix}kind={member} with {prefix}{member}.{option_field.name}={value}"])
    return ""


def check_choices(node: Any, prefix: str = "") -> None:
    """Raises ValueError naming the first key of `node` (a config, or a section of one) whose
    value is not one of its field's choices (`option(choices=...)`), e.g. a model.kind that
    does not exist, with the value likely meant when there is one."""
    for name, field, value in members(node):
        if dataclasses.is_dataclass(value):
            check_choices(value, f"{prefix}{name}.")
            continue
        choices = field.metadata.get("choices", ()) if field is not None else ()
        if choices and value not in choices:
            hint = _choice_hint(node, prefix, name, value, choices)
            raise ValueError(f"{prefix}{name} must be one of {', '.join(choices)}, got {value!r}{hint}")


def _replace(node: Any, assignments: list[tuple[list[str], Any, str]], config: Config, prefix: str = "") -> Any:
    """`node` with each (path, value, key) assignment set, values converted to their annotated
    types. Each dataclass is rebuilt once with all of its assignments, so that options checked
    together (a group's `__post_init__`) can be changed together; a group's check names the
    key it refuses by its full path (`objective.scheduled_sampling.passes must be ...`)."""
    types_ = member_types(type(node))
    updates: dict[str, Any] = {}
    groups: dict[str, list[tuple[list[str], Any, str]]] = {}
    for path, value, key in assignments:
        name = path[0]
        if name not in types_:
            raise _unknown_key(config, key)
        child = getattr(node, name)
        if len(path) == 1:
            if key in MOVED:  # head.tree, the tree head's group, was its option
                raise _unknown_key(config, key)
            if dataclasses.is_dataclass(child):
                raise ValueError(
                    f"{key} is a group of keys, not a value: set one of {', '.join(valid_keys(child, key + '.'))}"
                )
            updates[name] = _coerce(value, types_[name], key)
        elif dataclasses.is_dataclass(child):
            groups.setdefault(name, []).append((path[1:], value, key))
        else:
            raise _unknown_key(config, key)
    for name, group in groups.items():
        updates[name] = _replace(getattr(node, name), group, config, f"{prefix}{name}.")
    try:
        return _rebuilt(node, updates)
    except ValueError as error:
        if not prefix:
            raise
        raise ValueError(f"{prefix}{error}") from None


def _rebuilt(node: Any, updates: dict[str, Any]) -> Any:
    """`node` with `updates` (name -> value, or a kind's options under the kind's name)."""
    fields = {f.name for f in dataclasses.fields(node)}
    groups = {name: value for name, value in updates.items() if name not in fields}
    node = node.with_groups(**groups) if groups else node
    return dataclasses.replace(node, **{name: value for name, value in updates.items() if name in fields})


def inapplicable(config: Config, key: str) -> str | None:
    """Why `key` means nothing under `config`'s kinds (a field declared for other kinds, or a
    group named for another kind), or None when it applies."""
    node: Any = config
    parts = key.split(".")
    for depth, name in enumerate(parts):
        field, child = {member: (f, value) for member, f, value in members(node)}[name]
        owner = ".".join(parts[:depth])
        kind = getattr(node, "kind", None)
        if kind is not None and dataclasses.is_dataclass(child) and name != kind:
            return f"{key} applies to {owner}.kind={name}, not {kind!r}"
        kinds = field.metadata.get("kinds", ()) if field is not None else ()
        if kind is not None and kinds and kind not in kinds:
            return f"{key} applies to {owner}.kind in ({', '.join(kinds)}), not {kind!r}"
        node = child
    return None


def override(config: Config, assignments: list[str]) -> Config:
    """Applies `section.key=value` assignments, each checked against the dataclass types.

    Raises:
      ValueError: malformed assignment, unknown key (the message names the likely meant one),
        a renamed key (the message names the new one), a value that does not convert to the
        field's type or is not one of its choices (`check_choices`, for every key of the
        result), or a key that does not apply to the resolved kind (it would be ignored).
    """
    keys, parsed = [], []
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--set expects key=value, got {assignment!r}")
        keys.append(key)
        parsed.append((key.split("."), value, key))
    config = _replace(config, parsed, config)
    check_choices(config)
    for key in keys:
        reason = inapplicable(config, key)
        if reason:
            raise ValueError(f"{reason}: it would be ignored")
    return config


def to_dict(config: Any) -> dict[str, Any]:
    """Every key of a config (or a section or group of one), nested by its path."""
    return {name: to_dict(value) if dataclasses.is_dataclass(value) else value for name, _, value in members(config)}


def _from_dict(cls: Any, values: dict[str, Any], prefix: str) -> Any:
    types_ = member_types(cls)
    updates = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if key in RENAMED:
            raise ValueError(f"saved config key {key!r} was renamed to {RENAMED[key]!r}; this version cannot read it")
        if name not in types_:
            raise ValueError(f"unknown config key {key!r} in saved config")
        kind = types_[name]
        if dataclasses.is_dataclass(kind):
            if not isinstance(value, dict):
                raise ValueError(f"{key} must be a group of keys in saved config, got {value!r}")
            updates[name] = _from_dict(kind, value, key + ".")
        else:
            updates[name] = _coerce(value, kind, key)
    try:
        return _rebuilt(cls(), updates) if issubclass(cls, KindSection) else cls(**updates)
    except ValueError as error:  # a group's own check names its option; the key is its full path
        if not prefix:
            raise
        raise ValueError(f"{prefix}{error}") from None


def from_dict(values: dict[str, Any]) -> Config:
    """Rebuilds a Config from `to_dict` output (e.g. a checkpoint's saved config).

    Unknown or renamed keys and values outside their choices raise ValueError, so that a
    config from an incompatible version is refused rather than silently half-read.
    """
    config = _from_dict(Config, _moved_into_groups(values), "")
    check_choices(config)
    return config


def _moved_into_groups(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each key of `MOVED` (a config saved before model and head kinds had groups)
    moved to its key in the group of its kind."""
    moved = {section: dict(keys) if isinstance(keys, dict) else keys for section, keys in values.items()}
    for old, new in MOVED.items():
        section, name = old.split(".")
        keys = moved.get(section)
        # head.tree was the tree's option and is now the tree head's group: only a value moves
        if isinstance(keys, dict) and name in keys and not isinstance(keys[name], dict):
            kind = new.split(".")[1]
            value = keys.pop(name)
            keys[kind] = {**keys.get(kind, {}), name: value}
    return moved


def dumps(config: Config) -> str:
    return json.dumps(to_dict(config), indent=2)
