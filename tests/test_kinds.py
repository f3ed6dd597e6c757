"""Each model and head kind is declared once: `seqjax.kinds` names it, the code registries map
exactly those names, and one registration makes a new kind valid, listed and built."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import numpy as np
import pytest

from seqjax import config as config_lib
from seqjax import kinds, models
from seqjax.cli import main
from seqjax.config import Config, HeadConfig, ModelConfig
from seqjax.heads import build
from seqjax.models import MODEL_KINDS


def test_the_model_registry_maps_exactly_the_declared_model_kinds_in_order():
    assert tuple(MODEL_KINDS) == tuple(kinds.MODELS)


def test_the_head_registry_maps_exactly_the_declared_head_kinds_in_order():
    assert tuple(build.HEAD_BUILDERS) == tuple(kinds.HEADS)


@pytest.mark.parametrize("section, table", [(ModelConfig, kinds.MODELS), (HeadConfig, kinds.HEADS)])
def test_every_option_applies_only_to_declared_kinds(section, table):
    undeclared = {
        field.name: sorted(set(field.metadata["kinds"]) - set(table))
        for field in dataclasses.fields(section)
        if set(field.metadata["kinds"]) - set(table)
    }
    assert undeclared == {}


def test_a_family_is_a_live_view_that_sees_a_kind_added_later():
    table = kinds.Kinds("head", {"a": ("x",), "b": ()})
    family = table.reading("x")
    table.add("c", ("x",))
    assert tuple(family) == ("a", "c") and "c" in family and "b" not in family


def test_a_kind_name_already_taken_is_refused():
    with pytest.raises(ValueError, match="head.kind 'full' is already registered"):
        kinds.Kinds("head", {"full": ()}).add("full")


class _Dummy(nn.Module):
    vocab_size: int
    tied: bool


@pytest.fixture
def dummy_head(monkeypatch):
    """`head.kind=dummy`, reading the `tied` option, registered by one call for this test only."""
    monkeypatch.setattr(kinds.HEADS, "families", dict(kinds.HEADS.families))
    monkeypatch.setattr(build, "HEAD_BUILDERS", dict(build.HEAD_BUILDERS))
    build.register_head("dummy", lambda cfg, vocab_size, counts: _Dummy(vocab_size, cfg.tied), families=("tied",))


def test_a_head_kind_registered_once_is_accepted_by_validation(dummy_head):
    cfg = config_lib.override(Config(), ["head.kind=dummy", "head.tied=true"])
    assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg
    with pytest.raises(ValueError, match="head.num_samples applies to head.kind in"):
        config_lib.override(Config(), ["head.kind=dummy", "head.num_samples=8"])


def test_a_head_kind_registered_once_is_listed_by_seqjax_config(dummy_head, capsys):
    assert main(["config", "--set", "head.kind=dummy"]) == 0
    out = capsys.readouterr().out
    assert 'kind = "dummy"' in out
    assert "adaptive | dummy" in out


def test_a_head_kind_registered_once_is_built(dummy_head):
    head = build.build_head(HeadConfig(kind="dummy", tied=True), 5, np.ones(5))
    assert head == _Dummy(5, True)


class _DummySeq2Seq:
    has_encoder = True
    takes_pretrained_encoder = True
    objective = "teacher_forcing"


@pytest.fixture
def dummy_model(monkeypatch):
    """`model.kind=dummy`: an encoder-decoder that starts from a pre-trained encoder and that one
    objective trains, registered by one call for this test only."""
    monkeypatch.setattr(kinds.MODELS, "families", dict(kinds.MODELS.families))
    monkeypatch.setattr(models, "MODEL_KINDS", dict(models.MODEL_KINDS))
    models.register_model("dummy", _DummySeq2Seq)


def test_a_model_kind_registered_once_is_in_the_tables_of_what_model_classes_state(dummy_model):
    assert models.MODEL_OBJECTIVES["dummy"] == "teacher_forcing"
    assert "dummy" in models.SEQ2SEQ_KINDS
    assert "dummy" in models.PRETRAINED_ENCODER_KINDS


def test_the_objective_kinds_are_exactly_the_option_groups_of_the_objective_config():
    import dataclasses

    from seqjax.objective_config import OBJECTIVE_KINDS, ObjectiveConfig

    groups = tuple(field.name for field in dataclasses.fields(ObjectiveConfig) if field.name != "kind")
    assert groups == OBJECTIVE_KINDS
