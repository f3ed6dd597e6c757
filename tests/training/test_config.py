import pytest

from seqjax import config as config_lib
from seqjax.config import Config


def test_override_converts_values_to_the_field_types():
    cfg = config_lib.override(
        Config(), ["train.steps=7", "optim.learning_rate=1e-4", "head.tied=true", "data.buckets=8,16", "model.kind=rnn"]
    )
    assert cfg.train.steps == 7
    assert cfg.optim.learning_rate == 1e-4
    assert cfg.head.tied is True
    assert cfg.data.buckets == (8, 16)
    assert cfg.model.kind == "rnn"


def test_unknown_key_error_lists_the_valid_keys():
    with pytest.raises(ValueError, match=r"unknown config key 'train.stepz'.*train\.steps"):
        config_lib.override(Config(), ["train.stepz=3"])


@pytest.mark.parametrize("assignment", ["train.steps=abc", "train.steps=1.5", "head.tied=maybe", "optim.learning_rate=x"])
def test_wrong_value_type_names_key_and_value(assignment):
    key, value = assignment.split("=")
    with pytest.raises(ValueError, match=rf"{key}.*{value}"):
        config_lib.override(Config(), [assignment])


def test_assignment_without_equals_is_rejected():
    with pytest.raises(ValueError, match="key=value"):
        config_lib.override(Config(), ["train.steps"])


def test_dict_round_trip_preserves_the_config():
    cfg = config_lib.override(Config(), ["data.buckets=4,8", "train.seed=3"])
    assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg


def test_from_dict_refuses_unknown_saved_keys():
    values = config_lib.to_dict(Config())
    values["model"]["colour"] = "blue"
    with pytest.raises(ValueError, match="colour"):
        config_lib.from_dict(values)
