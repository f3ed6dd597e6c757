"""build_model: the kinds it builds and the config values it refuses on the host."""

import dataclasses

import pytest

from seqjax.config import ModelConfig
from seqjax.models import RNNLM, TransformerLM, build_model


def test_kind_selects_the_module():
    assert isinstance(build_model(ModelConfig(kind="rnn"), 10), RNNLM)
    assert isinstance(build_model(ModelConfig(kind="transformer"), 10), TransformerLM)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"kind": "lstm"}, "model.kind must be one of"),
        ({"kind": "rnn", "cell": "tanh"}, "model.cell must be one of lstm, gru, elman, got 'tanh'"),
        ({"d_model": 0}, "model.d_model must be an int >= 1, got 0"),
        ({"layers": -1}, "model.layers must be an int >= 1, got -1"),
        ({"dropout": 1.0}, r"model.dropout must be in \[0, 1\), got 1.0"),
        (
            {"d_model": 30, "num_heads": 4},
            r"model.d_model must be divisible by model.num_heads=4 \(model.head_dim=0\), got 30",
        ),
        ({"positions": "rotary"}, "model.positions must be one of sinusoidal, learned"),
        ({"norm": "mid"}, "model.norm must be one of pre, post"),
        ({"window": -2}, "model.window must be an int >= 0"),
        ({"dilation": 0}, "model.dilation must be an int >= 1, got 0"),
        ({"max_len": 0}, "model.max_len must be an int >= 1, got 0"),
    ],
)
def test_invalid_config_values_raise_naming_the_value_and_rule(changes, message):
    with pytest.raises(ValueError, match=message):
        build_model(dataclasses.replace(ModelConfig(), **changes), 10)


def test_non_positive_vocab_size_is_refused():
    with pytest.raises(ValueError, match="vocab_size must be an int >= 1, got 0"):
        build_model(ModelConfig(), 0)
