"""A kind is one `register` call in its own module: the registries (`seqjax.config.kinds`) refuse
a name, options class or family that would clash, and one registration makes a new kind, and its
group of options, valid, listed and built."""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import numpy as np
import pytest

from seqjax import config as config_lib
from seqjax import models
from seqjax.checks import integer
from seqjax.cli import main
from seqjax.config import (
    HEADS,
    MODELS,
    OBJECTIVES,
    OPTIMIZERS,
    Config,
    HeadConfig,
    ModelConfig,
    Options,
    Registry,
    option,
)
from seqjax.heads import build
from seqjax.heads.classes import ClassOptions
from seqjax.heads.tree import TreeOptions
from seqjax.objectives.masked_lm import MaskedLMOptions
from seqjax.objectives.reinforce import Mixer, Reinforce
from seqjax.optimizers.adamw import AdamWOptions


@pytest.mark.parametrize("section, registry", [(ModelConfig, MODELS), (HeadConfig, HEADS)])
def test_every_option_applies_only_to_registered_kinds(section, registry):
    unregistered = {
        field.name: sorted(set(config_lib.applies_to(field)) - set(registry))
        for field in dataclasses.fields(section)
        if set(config_lib.applies_to(field)) - set(registry)
    }
    assert unregistered == {}


@pytest.mark.parametrize("section", [ModelConfig, HeadConfig])
def test_an_option_only_one_kind_reads_is_in_that_kinds_group_not_flat(section):
    single = [field.name for field in dataclasses.fields(section) if len(config_lib.applies_to(field)) == 1]
    assert single == []


@pytest.mark.parametrize("registry", [MODELS, HEADS, OBJECTIVES, OPTIMIZERS])
def test_each_kinds_options_are_a_frozen_dataclass_whose_defaults_construct(registry):
    for options in registry.options.values():
        assert options.__dataclass_params__.frozen
        options()


@pytest.mark.parametrize(
    "options, values, message",
    [
        (TreeOptions, {"tree": "bogus"}, "tree must be one of huffman, balanced, got 'bogus'"),  # its Literal type
        (ClassOptions, {"num_classes": -1}, "num_classes must be an int >= 0, got -1"),  # check=integer(0)
        (AdamWOptions, {"b2": 1.0}, r"b2 must be in \[0, 1\), got 1.0"),  # check=check_rate
        # A rule between fields, after the declared ones: random_prob in [0, 1 - mask_prob].
        (
            MaskedLMOptions,
            {"mask_prob": 0.8, "random_prob": 0.3},
            r"random_prob must be a finite number in \[0.0, 0.19",
        ),
        (MaskedLMOptions, {"mask_prob": 1.5, "random_prob": 0.0}, r"mask_prob must be a finite number in \[0.0, 1.0\]"),
        # An objective is its options and the contract; its fields are checked as its options' are.
        (Reinforce, {"baseline": "bogus"}, "baseline must be one of self_critical, mean, none, got 'bogus'"),
        (Mixer, {"delta_every": 0}, "delta_every must be an int >= 1, got 0"),
    ],
)
def test_options_are_checked_when_made_by_their_types_and_declared_rules(options, values, message):
    with pytest.raises(ValueError, match=message):
        options(**values)


def test_a_declared_check_stands_only_where_options_apply_it():
    """`check=` is applied by `Options`: on a config section's field it would be silently ignored."""
    config = Config()
    sections = [getattr(config, field.name) for field in dataclasses.fields(config)]
    unapplied = [
        f"{type(section).__name__}.{field.name}"
        for section in sections
        for field in dataclasses.fields(section)
        if field.metadata.get("check") is not None
    ]
    assert sections and unapplied == []


def test_a_bad_option_is_refused_at_set_with_its_key_and_rule():
    for setting, message in [
        (
            "head.tree.tree=hufman",
            "head.tree.tree must be one of huffman, balanced, got 'hufman'; did you mean head.tree.tree=huffman",
        ),
        ("head.class.num_classes=-1", "head.class.num_classes must be an int >= 0, got -1"),
        (
            "objective.reinforce.baseline=self_critcal",
            "objective.reinforce.baseline must be one of self_critical, mean, none, got 'self_critcal'; "
            "did you mean objective.reinforce.baseline=self_critical",
        ),
    ]:
        section, kind = setting.split(".")[:2]
        kind = f"{section}.kind={kind}"
        with pytest.raises(ValueError, match=message):
            config_lib.override(Config(), [kind, setting])


def test_a_kinds_options_class_taken_by_another_kind_is_refused():
    registry = Registry("model.kind")
    registry.register("a", object, options=_DummyOptions)
    with pytest.raises(ValueError, match="model.kind 'b': _DummyOptions are another kind's options"):
        registry.register("b", object, options=_DummyOptions)


def test_options_that_are_not_a_frozen_dataclass_are_refused():
    with pytest.raises(ValueError, match="options must be a frozen dataclass deriving from seqjax.config.Options"):
        Registry("head.kind").register("a", object, options=dict)

    @dataclasses.dataclass(frozen=True)
    class Unchecked:
        width: int = option(2, "a width")

    with pytest.raises(ValueError, match="options must be a frozen dataclass deriving from seqjax.config.Options"):
        Registry("head.kind").register("a", object, options=Unchecked)


def test_a_family_the_registry_does_not_declare_is_refused():
    with pytest.raises(ValueError, match=r"unknown families \['recurrant'\]; model.kind's are recurrent"):
        Registry("model.kind", {"recurrent": ""}).register("a", object, families=("recurrant",))


def test_a_family_is_a_live_view_that_sees_a_kind_added_later():
    registry = Registry("head.kind", {"x": "", "y": ""})
    registry.register("a", object, families=("x",))
    registry.register("b", object)
    family = registry.family("x")
    registry.register("c", object, families=("x", "y"))
    assert tuple(family) == ("a", "c") and "c" in family and "b" not in family


def test_a_kind_name_already_taken_or_not_an_identifier_is_refused():
    with pytest.raises(ValueError, match="head.kind 'full' is already registered"):
        HEADS.register("full", object)
    with pytest.raises(ValueError, match="head.kind must be a Python identifier, got 'a-b'"):
        Registry("head.kind").register("a-b", object)


def test_a_removed_kind_is_no_longer_a_choice():
    registry = Registry("optim.kind")
    registry.register("a", object)
    registry.remove("a")
    assert "a" not in registry
    with pytest.raises(ValueError, match="optim.kind must be one of , got 'a'"):
        registry["a"]


@pytest.fixture
def registered():
    """register(registry, name, build, ...): a kind registered for this test only."""
    added: list[tuple[Registry, str]] = []

    def register(registry: Registry, name: str, build_: Any, **kwargs: Any) -> None:
        registry.register(name, build_, **kwargs)
        added.append((registry, name))

    yield register
    for registry, name in added:
        registry.remove(name)


@dataclasses.dataclass(frozen=True)
class _DummyOptions(Options):
    """The options only the dummy head reads."""

    width: int = option(2, "a width of the dummy head's own", check=integer())


class _Dummy(nn.Module):
    vocab_size: int
    tied: bool
    width: int


@pytest.fixture
def dummy_head(registered):
    """`head.kind=dummy`, reading the `tied` option and its own `head.dummy.width`, registered by
    one call for this test only."""
    registered(
        HEADS,
        "dummy",
        lambda cfg, vocab_size, counts, precision: _Dummy(vocab_size, cfg.tied, cfg.options.width),
        families=("tied",),
        options=_DummyOptions,
    )


def test_a_head_kind_registered_once_is_accepted_by_validation_with_its_own_options(dummy_head):
    cfg = config_lib.override(Config(), ["head.kind=dummy", "head.tied=true", "head.dummy.width=3"])
    assert cfg.head.options == _DummyOptions(width=3)
    assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg
    with pytest.raises(ValueError, match="head.num_samples applies to head.kind in"):
        config_lib.override(Config(), ["head.kind=dummy", "head.num_samples=8"])
    with pytest.raises(ValueError, match="head.dummy.width must be an int >= 1, got 0"):
        config_lib.override(Config(), ["head.kind=dummy", "head.dummy.width=0"])


def test_a_head_kinds_own_options_are_refused_for_another_kind(dummy_head):
    with pytest.raises(
        ValueError, match="head.dummy.width applies to head.kind=dummy, not 'full': it would be ignored"
    ):
        config_lib.override(Config(), ["head.dummy.width=3"])


def test_a_head_kind_registered_once_is_listed_by_seqjax_config_with_its_options(dummy_head, capsys):
    assert main(["config", "--set", "head.kind=dummy", "--set", "head.dummy.width=3"]) == 0
    out = capsys.readouterr().out
    assert 'kind = "dummy"' in out
    assert "adaptive | dummy" in out
    assert "[head.dummy]\nwidth = 3  # int, default 2: a width of the dummy head's own\n" in out


def test_a_head_kind_registered_once_is_built_with_its_own_options(dummy_head):
    cfg = config_lib.override(Config(), ["head.kind=dummy", "head.tied=true", "head.dummy.width=3"])
    assert build.build_head(cfg.head, 5, np.ones(5)) == _Dummy(5, True, 3)


class _DummySeq2Seq:
    has_encoder = True
    encoder_parts = {"blocks": "enc", "norm": "enc_norm", "inputs": "src_inputs", "embedding": "src/embedding"}
    objective = "teacher_forcing"


@pytest.fixture
def dummy_model(registered):
    """`model.kind=dummy`: an encoder-decoder that starts from a pre-trained encoder and that one
    objective trains, registered by one call for this test only."""
    registered(MODELS, "dummy", _DummySeq2Seq)


def test_a_model_kind_registered_once_is_in_the_tables_of_what_model_classes_state(dummy_model):
    assert models.MODEL_OBJECTIVES["dummy"] == "teacher_forcing"
    assert "dummy" in models.SEQ2SEQ_KINDS
    assert models.ENCODER_PARTS["dummy"]["blocks"] == "enc"
    assert models.takes_pretrained_encoder(ModelConfig(kind="dummy"))


class _DummyLM(nn.Module):
    has_encoder = False
    cfg: ModelConfig
    vocab_size: int
    dtype: Any


@pytest.fixture
def dummy_lm(registered):
    """`model.kind=dummy`: a language model reading the `neural` options and its own
    `model.dummy.width`, registered by one call for this test only."""
    registered(MODELS, "dummy", _DummyLM, families=("neural",), options=_DummyOptions)


def test_a_model_kind_registered_once_is_validated_and_built_with_its_own_options(dummy_lm):
    cfg = config_lib.override(Config(), ["model.kind=dummy", "model.d_model=8", "model.dummy.width=3"])
    model = models.build_model(cfg.model, 5)
    assert isinstance(model, _DummyLM) and model.cfg.options == _DummyOptions(width=3)
    with pytest.raises(ValueError, match="model.dummy.width applies to model.kind=dummy, not 'transformer'"):
        config_lib.override(Config(), ["model.dummy.width=3"])
