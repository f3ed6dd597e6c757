"""`RunDir`: a run directory's files under their one set of names; its config read once, with
one-line refusals of a directory that holds no run or a Hugging Face checkpoint; its
vocabularies saved and read back as `load_data` takes them."""

import json

import pytest

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.data import build_tokenizer
from seqjax.training.core.run_dir import RunDir


def test_the_config_is_read_once_and_written_as_every_key(tmp_path):
    run = RunDir(str(tmp_path))
    cfg = config_lib.override(Config(), ["model.d_model=48"])
    run.write_config(cfg)
    assert config_lib.from_dict(json.loads((tmp_path / "config.json").read_text())) == cfg
    assert run.config == cfg
    run.write_config(Config())  # a later write does not reach what this RunDir has read
    assert run.config.model.d_model == 48 and RunDir(str(tmp_path)).config == Config()


def test_a_directory_without_a_run_is_refused_naming_it_as_the_user_gave_it(tmp_path):
    with pytest.raises(ValueError, match=r"^train.init_from='x' holds no run \(no config.json\)$"):
        _ = RunDir(str(tmp_path), "train.init_from='x'").config
    with pytest.raises(ValueError, match=f"^--workdir {tmp_path} holds no run"):
        _ = RunDir(str(tmp_path)).config


def test_a_hugging_face_checkpoint_is_refused_with_the_import_command(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match=f"seqjax import-hf {tmp_path} --workdir RUN"):
        _ = RunDir(str(tmp_path)).config


def test_vocabularies_round_trip_one_side_or_two(tmp_path):
    target, source = build_tokenizer("char", ["abc"]), build_tokenizer("char", ["xyz"])
    lm, seq2seq = RunDir(str(tmp_path / "lm")), RunDir(str(tmp_path / "s2s"))
    assert lm.tokenizers() is None
    lm.save_tokenizers(target)
    seq2seq.save_tokenizers(target, source)
    assert lm.tokenizers().vocab.to_json() == target.vocab.to_json()
    read_source, read_target = seq2seq.tokenizers()
    assert read_source.vocab.to_json() == source.vocab.to_json()
    assert read_target.vocab.to_json() == target.vocab.to_json()
    assert lm.tokenizer_fingerprint() == seq2seq.tokenizer_fingerprint()


def test_checkpoints_live_under_the_run(tmp_path):
    checkpointer = RunDir(str(tmp_path)).checkpointer(2)
    assert checkpointer.directory == str(tmp_path / "checkpoints") and checkpointer.keep == 2
