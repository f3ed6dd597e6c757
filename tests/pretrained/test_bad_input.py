"""Checkpoints and runs that cannot be converted are refused on the host, each with a message
naming what is wrong, and nothing is written."""

import dataclasses
import json
import shutil

import numpy as np
import pytest
from pretrained_helpers import FIXTURES

from seqjax.config import Config, HeadConfig, ModelConfig
from seqjax.pretrained import export_run, import_checkpoint
from seqjax.pretrained.families import twin_of_run
from seqjax.pretrained.runs import read_run, write_run
from seqjax.pretrained.tensor_files import read_safetensors, write_safetensors


def copy_of(name, tmp_path):
    directory = tmp_path / name
    shutil.copytree(FIXTURES / name, directory)
    return directory


def edit_json(path, **changes):
    values = json.loads(path.read_text())
    values.update(changes)
    path.write_text(json.dumps(values))


def refused(checkpoint, tmp_path, message):
    with pytest.raises(ValueError, match=message):
        import_checkpoint(str(checkpoint), str(tmp_path / "run"), echo=lambda _: None)
    assert not (tmp_path / "run").exists()


def test_missing_unexpected_and_misshapen_tensors_are_each_named_with_both_shapes(tmp_path):
    checkpoint = copy_of("gpt2", tmp_path)
    tensors = read_safetensors(str(checkpoint / "model.safetensors"))
    del tensors["transformer.h.1.mlp.c_fc.bias"]
    tensors["transformer.wpe.weight"] = np.zeros((32, 32), np.float32)
    tensors["transformer.h.0.extra"] = np.zeros((3,), np.float32)
    write_safetensors(str(checkpoint / "model.safetensors"), tensors)
    refused(
        checkpoint,
        tmp_path,
        r"transformer.wpe.weight expected \[64, 32\], found \[32, 32\]; "
        r"transformer.h.1.mlp.c_fc.bias missing \(expected \[64\]\); "
        r"transformer.h.0.extra unexpected \(found \[3\]\)",
    )


@pytest.mark.parametrize(
    "name, changes, message",
    [
        (
            "gpt2",
            {"model_type": "bert"},
            "model_type='bert' is not supported; supported: gpt2, llama, mistral, qwen2, qwen3",
        ),
        ("qwen2_bias", {"use_sliding_window": True}, "Qwen2 use_sliding_window=true has no counterpart"),
        ("qwen3_qk_norm", {"attention_bias": True}, "Qwen3 attention_bias=true has no counterpart"),
        ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, "GPT-2 scale_attn_by_inverse_layer_idx=True has no"),
        ("gpt2", {"activation_function": "swish"}, "GPT-2 activation_function='swish' has no counterpart"),
        ("llama_gqa", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 5e5}}, "rope_type='yarn' has no"),
        (
            "llama_gqa",
            {"rope_parameters": {"rope_type": "llama3", "factor": 8.0}},
            "rope_type='llama3' without low_freq_factor, high_freq_factor, original_max_position_embeddings",
        ),
    ],
)
def test_settings_without_a_counterpart_are_refused_by_name(name, changes, message, tmp_path):
    checkpoint = copy_of(name, tmp_path)
    edit_json(checkpoint / "config.json", **changes)
    refused(checkpoint, tmp_path, message)


def test_a_declared_special_token_missing_from_the_vocabulary_is_named(tmp_path):
    checkpoint = copy_of("llama_gqa", tmp_path)
    edit_json(checkpoint / "tokenizer_config.json", eos_token="<|end|>")
    refused(checkpoint, tmp_path, "eos_token '<|end|>' declared in tokenizer_config.json is not in the vocabulary")


def test_a_tokenizer_without_an_end_of_sequence_token_is_refused(tmp_path):
    checkpoint = copy_of("gpt2", tmp_path)
    (checkpoint / "tokenizer_config.json").unlink()
    edit_json(checkpoint / "config.json", eos_token_id=None, bos_token_id=None)
    refused(checkpoint, tmp_path, "declares no end-of-sequence token")


def test_a_directory_without_safetensors_weights_is_refused_naming_what_it_holds(tmp_path):
    checkpoint = copy_of("gpt2", tmp_path)
    (checkpoint / "model.safetensors").rename(checkpoint / "pytorch_model.bin")
    refused(checkpoint, tmp_path, "must hold model.safetensors or model.safetensors.index.json.*pytorch_model.bin")


def test_import_into_a_directory_that_holds_something_writes_nothing(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="must be a new or empty directory"):
        import_checkpoint(str(FIXTURES / "gpt2"), str(tmp_path / "run"), echo=lambda _: None)
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["notes.txt"]


def test_a_run_without_a_twin_is_refused_with_what_differs_from_each_family():
    with pytest.raises(
        ValueError, match="as gpt2: model.positions='sinusoidal', GPT-2 has learned positions.*as llama"
    ):
        twin_of_run(Config(model=ModelConfig(kind="transformer")))
    gpt2 = ModelConfig(kind="transformer", positions="learned", scale_embeddings=False)
    with pytest.raises(ValueError, match="model.window=4, GPT-2 has full causal attention"):
        twin_of_run(Config(model=dataclasses.replace(gpt2, window=4)))
    llama = dataclasses.replace(gpt2, positions="rope", norm_type="rmsnorm", mlp="swiglu", bias=False)
    with pytest.raises(ValueError, match="as mistral: model.dilation=2, Mistral has a sliding window without gaps$"):
        twin_of_run(Config(model=dataclasses.replace(llama, window=4, dilation=2)))
    with pytest.raises(ValueError, match="head.kind='tree' has no Hugging Face twin"):
        twin_of_run(Config(model=gpt2, head=HeadConfig(kind="tree")))


def test_a_run_whose_output_biases_were_trained_is_refused_at_export(imported, tmp_path):
    cfg, tokenizer, params, _ = read_run(str(imported("gpt2")))
    params["head"]["biases"] = params["head"]["biases"] + np.linspace(0, 1, len(params["head"]["biases"]))
    write_run(str(tmp_path / "run"), cfg, tokenizer, params)
    with pytest.raises(ValueError, match="output biases differ across words"):
        export_run(str(tmp_path / "run"), str(tmp_path / "hf"), echo=lambda _: None)
    assert not (tmp_path / "hf").exists()
