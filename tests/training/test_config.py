import functools
import typing

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


def test_unknown_key_error_suggests_the_close_key_without_listing_every_key():
    with pytest.raises(ValueError, match=r"unknown config key 'train.stepz'; did you mean train\.steps\?") as error:
        config_lib.override(Config(), ["train.stepz=3"])
    assert "data.kind" not in str(error.value)


def test_unknown_key_error_suggests_the_same_name_in_another_section():
    with pytest.raises(ValueError, match=r"unknown config key 'model.cutoffs'; did you mean head\.adaptive\.cutoffs\?"):
        config_lib.override(Config(), ["model.cutoffs=10"])


def test_an_unknown_kind_is_refused_naming_the_kinds_and_the_option_that_takes_it():
    want = (
        f"model.kind must be one of {', '.join(config_lib.MODELS)}, got 'lstm'; "
        "did you mean model.kind=rnn with model.cell=lstm?"
    )
    with pytest.raises(ValueError) as error:
        config_lib.override(Config(), ["model.kind=lstm"])
    assert str(error.value) == want
    values = config_lib.to_dict(Config())
    values["model"]["kind"] = "lstm"
    with pytest.raises(ValueError) as error:
        config_lib.from_dict(values)
    assert str(error.value) == want


def test_a_misspelt_choice_is_refused_with_its_close_spelling():
    with pytest.raises(
        ValueError, match=r"^data.tokenizer must be one of char, word, bpe, pretrained, got 'words'; did you mean "
    ):
        config_lib.override(Config(), ["data.tokenizer=words"])


def test_the_code_behind_each_fixed_choice_takes_exactly_those_names():
    from seqjax.config.sections import SyntheticTask, TokenizerKind
    from seqjax.data.synthetic import SEQ2SEQ_TASKS
    from seqjax.data.tokenizers.trained import TOKENIZER_KINDS

    assert TOKENIZER_KINDS == typing.get_args(TokenizerKind)
    assert typing.get_args(SyntheticTask) == ("grammar", "oracle", *SEQ2SEQ_TASKS)


@pytest.mark.parametrize(
    "assignment", ["train.steps=abc", "train.steps=1.5", "head.tied=maybe", "optim.learning_rate=x"]
)
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


def assert_refused_as_renamed(old, new):
    """`old` set to 4, by `--set` and in a saved config, is refused with the name `new` begins."""
    with pytest.raises(ValueError, match=rf"{old}' was renamed to '{new}"):
        config_lib.override(Config(), [f"{old}=4"])
    values = config_lib.to_dict(Config())
    *groups, name = old.split(".")
    functools.reduce(dict.__getitem__, groups, values)[name] = 4
    with pytest.raises(ValueError, match=rf"{old}' was renamed to '{new}"):
        config_lib.from_dict(values)


@pytest.mark.parametrize(
    "old, new",
    [
        ("model.heads", "model.num_heads"),
        ("data.max_len", "data.max_pair_len"),
        ("train.samples", "train.num_printed_samples"),
        ("train.sample_len", "train.printed_sample_len"),
    ],
)
def test_a_renamed_key_is_refused_with_its_new_name(old, new):
    assert_refused_as_renamed(old, new)


def test_a_key_set_for_another_kind_is_refused_after_every_assignment_is_applied():
    with pytest.raises(ValueError, match=r"model.cell applies to model.kind in \(rnn, .*\), not 'transformer'"):
        config_lib.override(Config(), ["model.cell=gru"])
    cfg = config_lib.override(Config(), ["model.cell=gru", "model.kind=rnn"])
    assert (cfg.model.kind, cfg.model.cell) == ("rnn", "gru")
    with pytest.raises(ValueError, match="head.adaptive.cutoffs applies to head.kind=adaptive, not 'full'"):
        config_lib.override(Config(), ["head.adaptive.cutoffs=10,20"])


def test_valid_keys_cover_every_field_of_every_section():
    keys = config_lib.valid_keys(Config())
    assert "model.num_heads" in keys and "train.num_printed_samples" in keys and "data.root" in keys
    assert len(keys) == len(set(keys))


def test_an_objective_option_refused_by_its_group_is_named_by_its_full_key():
    with pytest.raises(ValueError, match=r"^objective.scheduled_sampling.passes must be an int >= 2, got 1$"):
        config_lib.override(Config(), ["objective.kind=scheduled_sampling", "objective.scheduled_sampling.passes=1"])
    values = config_lib.to_dict(Config())
    values["objective"]["scheduled_sampling"]["passes"] = 1
    with pytest.raises(ValueError, match=r"^objective.scheduled_sampling.passes must be an int >= 2, got 1$"):
        config_lib.from_dict(values)


def test_options_a_group_checks_together_can_be_set_together_in_any_order():
    group = ["objective.scheduled_sampling.schedule=linear", "objective.scheduled_sampling.k=0.5"]
    for assignments in (group, group[::-1]):
        cfg = config_lib.override(Config(), ["objective.kind=scheduled_sampling", *assignments])
        assert (cfg.objective.group("scheduled_sampling").schedule, cfg.objective.group("scheduled_sampling").k) == (
            "linear",
            0.5,
        )
        assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg


@pytest.mark.parametrize(
    "old, new",
    [
        ("objective.k", "objective.scheduled_sampling.k"),
        ("objective.candidates", "objective.minimum_risk.search"),
        ("objective.samples", "objective.reinforce.sequences_per_source"),
    ],
)
def test_a_flat_objective_key_is_refused_with_its_nested_name(old, new):
    assert_refused_as_renamed(old, new)


@pytest.mark.parametrize("group", ["reinforce", "mixer"])
def test_reinforces_sequence_count_under_the_sampling_heads_name_is_refused_with_its_own(group):
    assert_refused_as_renamed(f"objective.{group}.num_samples", f"objective.{group}.sequences_per_source")


def test_a_checkpoint_config_saved_before_a_key_existed_compares_as_that_keys_default():
    from seqjax.training.core.state import config_differences

    saved = config_lib.to_dict(Config())
    del saved["model"]["norm_eps"], saved["model"]["scale_embeddings"], saved["head"]["learn_bias"]
    assert config_differences(saved, config_lib.to_dict(Config())) == []
    saved["model"]["d_model"] = 64
    assert config_differences(saved, config_lib.to_dict(Config())) == ["model.d_model: checkpoint has 64, now 128"]


@pytest.mark.parametrize("text", ["[2000, 8000]", "[2000,8000]", "2000,8000", "(2000, 8000)"])
def test_a_tuple_is_set_as_the_toml_list_seqjax_config_prints_or_with_commas(text):
    cfg = config_lib.override(Config(), ["head.kind=adaptive", f"head.adaptive.cutoffs={text}"])
    assert cfg.head.options.cutoffs == (2000, 8000)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[2000, 8000", r"head.adaptive.cutoffs must be a list such as \[16, 32\] \(or 16,32\), got '\[2000, 8000'"),
        ("[[1, 2]]", r"head.adaptive.cutoffs must be int, got \[1, 2\]"),
    ],
)
def test_a_malformed_list_is_refused_naming_the_key(text, message):
    with pytest.raises(ValueError, match=message):
        config_lib.override(Config(), ["head.kind=adaptive", f"head.adaptive.cutoffs={text}"])
