"""Each family's config.json read and written against transformers' own definitions: the
defaults a real file leaves out (GPT-2's activation_function and n_inner, Llama's
num_key_value_heads and rope_theta), the GELU each activation name means (from its formula),
the key/value heads of an exported grouped-query Llama, and the EOS a list of ids gives. No
checkpoint is read: these are the mapping's pure functions."""

import dataclasses
import math

import numpy as np
import pytest
from tokenizers import Tokenizer, models

from seqjax.config import ModelConfig
from seqjax.models.transformer.blocks import ACTIVATIONS
from seqjax.pretrained import gpt2, llama
from seqjax.pretrained.specials import special_roles

# openai-community/gpt2's config.json as published, without the keys transformers'
# GPT2Config fills in: activation_function ("gelu_new"), n_inner (None: 4·n_embd),
# tie_word_embeddings (true).
GPT2_CONFIG = {
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "vocab_size": 50257,
}
# huggyllama/llama-7b's config.json (LLaMA 1, written before grouped-query attention): no
# num_key_value_heads (transformers: num_attention_heads), no rope_theta (10000).
LLAMA1_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "max_position_embeddings": 2048,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}
# TinyLlama-1.1B's: 32 query heads reading 4 key/value heads.
TINYLLAMA_CONFIG = LLAMA1_CONFIG | {
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
}


def tanh_gelu(x):
    """transformers' gelu_new (= gelu_pytorch_tanh, gelu_fast): GPT-2's own approximation."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def erf_gelu(x):
    """transformers' gelu: x·Φ(x), exactly."""
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


HF_ACTIVATIONS = {
    "gelu_new": tanh_gelu,
    "gelu_pytorch_tanh": tanh_gelu,
    "gelu_fast": tanh_gelu,
    "gelu": erf_gelu,
    "relu": lambda x: np.maximum(x, 0.0),
}
POINTS = np.linspace(-4.0, 4.0, 81)  # the two GELUs differ by up to 4e-4 here


def test_a_gpt2_config_without_the_keys_transformers_defaults_is_gpt2_small_with_its_tanh_gelu():
    cfg, tied, rows = gpt2.model_config(GPT2_CONFIG)
    assert (cfg.d_model, cfg.layers, cfg.num_heads, cfg.d_ff, cfg.max_len) == (768, 12, 12, 3072, 1024)
    assert (cfg.mlp, cfg.norm_eps, tied, rows) == ("gelu", 1e-5, True, 50257)
    np.testing.assert_allclose(ACTIVATIONS[cfg.mlp](POINTS), tanh_gelu(POINTS), atol=1e-6)


@pytest.mark.parametrize("name", list(HF_ACTIVATIONS))
def test_each_gpt2_activation_imports_as_the_function_of_its_formula(name):
    cfg, _, _ = gpt2.model_config(GPT2_CONFIG | {"activation_function": name})
    np.testing.assert_allclose(ACTIVATIONS[cfg.mlp](POINTS), HF_ACTIVATIONS[name](POINTS), atol=1e-6)


@pytest.mark.parametrize("mlp", ["gelu", "gelu_exact", "relu"])
def test_each_activation_exports_as_the_gpt2_name_of_the_same_function(mlp):
    cfg = dataclasses.replace(gpt2.model_config(GPT2_CONFIG)[0], mlp=mlp)
    written = gpt2.hf_config(cfg, 50257, True)["activation_function"]
    np.testing.assert_allclose(HF_ACTIVATIONS[written](POINTS), ACTIVATIONS[mlp](POINTS), atol=1e-6)
    assert gpt2.model_config(GPT2_CONFIG | {"activation_function": written})[0] == cfg


def test_a_llama_config_without_num_key_value_heads_has_full_multi_head_attention():
    cfg, tied, rows = llama.model_config(LLAMA1_CONFIG)
    assert (cfg.num_heads, cfg.kv_heads) == (32, 0)  # 0: as many key/value heads as query heads
    assert (cfg.rope_base, cfg.norm_eps, cfg.max_len, cfg.d_ff, tied) == (10000.0, 1e-6, 2048, 11008, False)
    shapes = {t.name: t.shape for t in llama.table(cfg, rows, tied)}
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (4096, 4096)


def test_a_grouped_query_llama_reads_its_key_value_heads_and_writes_them_back():
    cfg, tied, rows = llama.model_config(TINYLLAMA_CONFIG)
    assert (cfg.num_heads, cfg.kv_heads, cfg.d_model // cfg.num_heads) == (32, 4, 64)
    written = llama.hf_config(cfg, rows, tied)
    assert (written["num_attention_heads"], written["num_key_value_heads"], written["head_dim"]) == (32, 4, 64)
    assert llama.model_config(written)[0] == cfg
    shapes = {t.name: t.shape for t in llama.table(cfg, rows, tied)}
    # transformers' LlamaAttention: k_proj and v_proj are Linear(hidden_size, num_key_value_heads · head_dim).
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (4 * 64, 2048)
    assert shapes["model.layers.0.self_attn.v_proj.weight"] == (4 * 64, 2048)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (2048, 2048)


@pytest.mark.parametrize("kv_heads, written", [(0, 8), (8, 8), (2, 2), (1, 1)])
def test_an_exported_llama_states_the_key_value_heads_its_attention_reads(kv_heads, written):
    cfg = ModelConfig(
        kind="transformer",
        d_model=64,
        num_heads=8,
        kv_heads=kv_heads,
        positions="rope",
        norm_type="rmsnorm",
        mlp="swiglu",
        bias=False,
        scale_embeddings=False,
    )
    assert llama.differences(cfg) == []
    config = llama.hf_config(cfg, 100, False)
    assert config["num_key_value_heads"] == written
    back = llama.model_config(config)[0]
    assert (back.kv_heads or back.num_heads) == written


def word_tokenizer(*tokens):
    return Tokenizer(models.WordLevel({token: i for i, token in enumerate(tokens)}, unk_token=tokens[0]))


def test_a_list_of_eos_ids_gives_the_first_and_bos_falls_back_to_it(tmp_path):
    """Llama 3.1 Instruct's config.json: eos_token_id [<|end_of_text|>, <|eom_id|>, <|eot_id|>]."""
    model = word_tokenizer("<unk>", "hello", "<|end_of_text|>", "<|eom_id|>", "<|eot_id|>")
    roles, statement = special_roles(str(tmp_path), model, {"eos_token_id": [2, 3, 4]})
    assert (roles["eos"], roles["bos"]) == (2, 2)
    assert "EOS <- '<|end_of_text|>' (id 2, from config.json)" in statement


def test_a_declared_eos_token_wins_over_config_jsons_list(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": "<|eot_id|>"}')
    model = word_tokenizer("<unk>", "hello", "<|end_of_text|>", "<|eom_id|>", "<|eot_id|>")
    roles, _ = special_roles(str(tmp_path), model, {"eos_token_id": [2, 3, 4], "bos_token_id": 1})
    assert (roles["eos"], roles["bos"]) == (4, 1)


def test_llama3_rope_scaling_is_read_from_transformers_4_and_5_configs_and_written_back():
    scaling = dict(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192)
    version_4 = TINYLLAMA_CONFIG | {"rope_theta": 5e5, "rope_scaling": {"rope_type": "llama3", **scaling}}
    version_5 = TINYLLAMA_CONFIG | {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, **scaling}}
    cfg = llama.model_config(version_4)[0]
    assert (cfg.rope_scaling, cfg.rope_base, cfg.rope_factor, cfg.rope_original_max_len) == ("llama3", 5e5, 32.0, 8192)
    assert llama.model_config(version_5)[0] == cfg
    assert llama.model_config(llama.hf_config(cfg, 32000, False))[0] == cfg
