"""Each model and head kind is declared once: `seqjax.kinds` names it with its families and its own
options, the code registries map exactly those names, and one registration makes a new kind, and
its group of options, valid, listed and built."""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import numpy as np
import pytest

from seqjax import config as config_lib
from seqjax import kinds, models
from seqjax.cli import main
from seqjax.config import Config, HeadConfig, ModelConfig
from seqjax.heads import build
from seqjax.models import MODEL_KINDS
from seqjax.options import option


def test_the_model_registry_maps_exactly_the_declared_model_kinds_in_order():
    assert tuple(MODEL_KINDS) == tuple(kinds.MODELS)


def test_the_head_registry_maps_exactly_the_declared_head_kinds_in_order():
    assert tuple(build.HEAD_BUILDERS) == tuple(kinds.HEADS)


@pytest.mark.parametrize("section, table", [(ModelConfig, kinds.MODELS), (HeadConfig, kinds.HEADS)])
def test_every_option_applies_only_to_declared_kinds(section, table):
    undeclared = {
        field.name: sorted(set(field.metadata.get("kinds", ())) - set(table))
        for field in dataclasses.fields(section)
        if set(field.metadata.get("kinds", ())) - set(table)
    }
    assert undeclared == {}


@pytest.mark.parametrize("section", [ModelConfig, HeadConfig])
def test_an_option_only_one_kind_reads_is_in_that_kinds_group_not_flat(section):
    single = [field.name for field in dataclasses.fields(section) if len(field.metadata.get("kinds", ())) == 1]
    assert single == []


@pytest.mark.parametrize("table", [kinds.MODELS, kinds.HEADS])
def test_each_kinds_options_are_a_frozen_dataclass_whose_defaults_construct(table):
    for options in table.options.values():
        assert dataclasses.fields(options) and options.__dataclass_params__.frozen
        options()


def test_a_kinds_options_class_taken_by_another_kind_is_refused():
    table = kinds.Kinds("model", {"a": kinds.Kind((), _DummyOptions)})
    with pytest.raises(ValueError, match="model.kind 'b': _DummyOptions are another kind's options"):
        table.add("b", (), _DummyOptions)


def test_a_family_is_a_live_view_that_sees_a_kind_added_later():
    table = kinds.Kinds("head", {"a": kinds.Kind(("x",)), "b": kinds.Kind()})
    family = table.reading("x")
    table.add("c", ("x",))
    assert tuple(family) == ("a", "c") and "c" in family and "b" not in family


def test_a_kind_name_already_taken_is_refused():
    with pytest.raises(ValueError, match="head.kind 'full' is already registered"):
        kinds.Kinds("head", {"full": kinds.Kind()}).add("full")


@dataclasses.dataclass(frozen=True)
class _DummyOptions:
    """The options only the dummy head reads."""

    width: int = option(2, "a width of the dummy head's own")

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError(f"width must be >= 1, got {self.width}")


class _Dummy(nn.Module):
    vocab_size: int
    tied: bool
    width: int


@pytest.fixture
def dummy_head(monkeypatch):
    """`head.kind=dummy`, reading the `tied` option and its own `head.dummy.width`, registered by
    one call for this test only."""
    monkeypatch.setattr(kinds.HEADS, "declared", dict(kinds.HEADS.declared))
    monkeypatch.setattr(build, "HEAD_BUILDERS", dict(build.HEAD_BUILDERS))
    build.register_head(
        "dummy",
        lambda cfg, vocab_size, counts, precision: _Dummy(vocab_size, cfg.tied, cfg.dummy.width),
        families=("tied",),
        options=_DummyOptions,
    )


def test_a_head_kind_registered_once_is_accepted_by_validation_with_its_own_options(dummy_head):
    cfg = config_lib.override(Config(), ["head.kind=dummy", "head.tied=true", "head.dummy.width=3"])
    assert cfg.head.dummy == _DummyOptions(width=3)
    assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg
    with pytest.raises(ValueError, match="head.num_samples applies to head.kind in"):
        config_lib.override(Config(), ["head.kind=dummy", "head.num_samples=8"])
    with pytest.raises(ValueError, match="head.dummy.width must be >= 1, got 0"):
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
    takes_pretrained_encoder = True
    objective = "teacher_forcing"


@pytest.fixture
def dummy_model(monkeypatch):
    """`model.kind=dummy`: an encoder-decoder that starts from a pre-trained encoder and that one
    objective trains, registered by one call for this test only."""
    monkeypatch.setattr(kinds.MODELS, "declared", dict(kinds.MODELS.declared))
    monkeypatch.setattr(models, "MODEL_KINDS", dict(models.MODEL_KINDS))
    models.register_model("dummy", _DummySeq2Seq)


def test_a_model_kind_registered_once_is_in_the_tables_of_what_model_classes_state(dummy_model):
    assert models.MODEL_OBJECTIVES["dummy"] == "teacher_forcing"
    assert "dummy" in models.SEQ2SEQ_KINDS
    assert "dummy" in models.PRETRAINED_ENCODER_KINDS


class _DummyLM(nn.Module):
    has_encoder = False
    cfg: ModelConfig
    vocab_size: int
    dtype: Any


@pytest.fixture
def dummy_lm(monkeypatch):
    """`model.kind=dummy`: a language model reading the `neural` options and its own
    `model.dummy.width`, registered by one call for this test only."""
    monkeypatch.setattr(kinds.MODELS, "declared", dict(kinds.MODELS.declared))
    monkeypatch.setattr(models, "MODEL_KINDS", dict(models.MODEL_KINDS))
    models.register_model("dummy", _DummyLM, families=("neural",), options=_DummyOptions)


def test_a_model_kind_registered_once_is_validated_and_built_with_its_own_options(dummy_lm):
    cfg = config_lib.override(Config(), ["model.kind=dummy", "model.d_model=8", "model.dummy.width=3"])
    model = models.build_model(cfg.model, 5)
    assert isinstance(model, _DummyLM) and model.cfg.dummy == _DummyOptions(width=3)
    with pytest.raises(ValueError, match="model.dummy.width applies to model.kind=dummy, not 'transformer'"):
        config_lib.override(Config(), ["model.dummy.width=3"])


def test_the_objective_kinds_are_exactly_the_option_groups_of_the_objective_config():
    from seqjax.objective_config import OBJECTIVE_KINDS, ObjectiveConfig

    groups = tuple(field.name for field in dataclasses.fields(ObjectiveConfig) if field.name != "kind")
    assert groups == OBJECTIVE_KINDS
