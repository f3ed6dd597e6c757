"""A kind's own options: a group named for the kind (`model.rnn_vae.latent_size`), refused for
another kind, read from configs saved when they were flat, read by the code that builds the kind
through the section (`options`, `options_of`), and named `head.class` for the kind that is a
Python keyword."""

import pytest

from seqjax import config as config_lib
from seqjax.config import Config, HeadConfig, ModelConfig
from seqjax.config.text import to_toml
from seqjax.heads import AdaptiveOptions, FullOptions, TreeOptions
from seqjax.models.language_models.vae import RNNVAEOptions


@pytest.mark.parametrize("old, new", sorted(config_lib.MOVED.items()))
def test_a_flat_key_of_one_kind_is_refused_by_set_naming_its_key_in_the_kinds_group(old, new):
    with pytest.raises(ValueError, match=rf"^{old} is now {new}, in the group of the one kind that reads it$"):
        config_lib.override(Config(), [f"{old}=1"])


def test_a_config_saved_with_flat_keys_of_one_kind_reads_them_into_the_kinds_group():
    values = config_lib.to_dict(Config())
    del values["model"]["rnn_vae"], values["head"]["adaptive"], values["head"]["tree"]
    values["model"].update(kind="rnn_vae", latent_size=8, feed_latent=True)
    values["head"].update(kind="adaptive", cutoffs=[10, 20], div_value=2.0, tree="balanced")
    cfg = config_lib.from_dict(values)
    assert cfg.model.group("rnn_vae") == RNNVAEOptions(latent_size=8, feed_latent=True)
    assert cfg.head.group("adaptive") == AdaptiveOptions(cutoffs=(10, 20), div_value=2.0)
    assert cfg.head.group("tree") == TreeOptions(tree="balanced")
    assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg


def test_a_kinds_group_set_for_another_kind_is_refused_as_ignored():
    with pytest.raises(ValueError, match="model.rnn_vae.latent_size applies to model.kind=rnn_vae, not 'transformer'"):
        config_lib.override(Config(), ["model.rnn_vae.latent_size=8"])
    cfg = config_lib.override(Config(), ["model.rnn_vae.latent_size=8", "model.kind=rnn_vae"])
    assert cfg.model.group("rnn_vae").latent_size == 8


def test_a_kinds_group_refused_by_its_check_is_named_by_its_full_key():
    with pytest.raises(ValueError, match=r"^model.rnn_vae.latent_size must be an int >= 1, got 0$"):
        config_lib.override(Config(), ["model.kind=rnn_vae", "model.rnn_vae.latent_size=0"])


def test_the_class_heads_group_is_named_head_class_on_every_user_facing_path():
    cfg = config_lib.override(Config(), ["head.kind=class", "head.class.num_classes=8"])
    assert cfg.head.group("class").num_classes == 8
    assert config_lib.to_dict(cfg)["head"]["class"] == {"num_classes": 8}
    assert "\n[head.class]\nnum_classes = 8  # int, default 0:" in to_toml(cfg)
    assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg
    with pytest.raises(ValueError, match=r"^head.class.num_classes must be an int >= 0, got -1$"):
        config_lib.override(Config(), ["head.kind=class", "head.class.num_classes=-1"])


def test_groups_at_their_defaults_compare_equal_to_no_groups_given():
    assert ModelConfig(groups=(RNNVAEOptions(),)) == ModelConfig()
    assert ModelConfig(groups=(RNNVAEOptions(latent_size=8),)).group("rnn_vae").latent_size == 8


def test_a_group_that_is_not_the_options_of_one_of_the_sections_kinds_is_refused():
    with pytest.raises(ValueError, match="model.kind groups must be options of its kinds"):
        ModelConfig(groups=(FullOptions(),))
    with pytest.raises(ValueError, match="head.full is given twice"):
        HeadConfig(groups=(FullOptions(), FullOptions(chunk_size=4)))


def test_a_section_gives_its_own_kinds_options_and_any_kinds_typed_by_their_class():
    cfg = config_lib.override(Config(), ["model.kind=rnn_vae", "model.rnn_vae.latent_size=8"])
    assert cfg.model.options == RNNVAEOptions(latent_size=8)
    assert cfg.model.options_of(RNNVAEOptions).latent_size == 8
    assert cfg.head.options == FullOptions() and cfg.head.options_of(AdaptiveOptions) == AdaptiveOptions()
    assert config_lib.override(Config(), ["head.kind=negative"]).head.options is None
    with pytest.raises(ValueError, match="FullOptions are not the options of a model.kind"):
        cfg.model.options_of(FullOptions)


def test_with_options_replaces_only_the_groups_of_the_kinds_given():
    head = HeadConfig(groups=(AdaptiveOptions(cutoffs=(5,)), TreeOptions(tree="balanced")))
    changed = head.with_options(AdaptiveOptions(cutoffs=(7,)))
    assert changed.group("adaptive").cutoffs == (7,) and changed.group("tree").tree == "balanced"
