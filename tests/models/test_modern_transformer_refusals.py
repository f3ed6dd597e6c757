"""The modern Transformer options refused on the host, each naming the value and its rule: values
out of range, keys set for another kind or of the wrong type, a kernel the devices lack, and a
checkpoint resumed across `model.scan_layers`."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from seqjax.config import ATTENTION, Config, ModelConfig, override, to_dict
from seqjax.models import build_model
from seqjax.training.core.resume import open_run
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import TrainState

V = 13
TINY = ModelConfig(kind="transformer", d_model=16, layers=2, num_heads=4, d_ff=32, dropout=0.0, max_len=8)
MODERN = dataclasses.replace(TINY, positions="rope", norm_type="rmsnorm", mlp="swiglu", kv_heads=2, bias=False)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"positions": "alibi"}, "model.positions must be one of sinusoidal, learned, rope, got 'alibi'"),
        (
            {"positions": "rope", "d_model": 12, "num_heads": 4},
            "head width \\(model.head_dim, else .*\\) must be even for rope positions, got 3",
        ),
        ({"rope_base": 1.0}, "model.rope_base must be a finite number in \\(1.0, inf\\), got 1.0"),
        ({"rope_scaling": "yarn"}, "model.rope_scaling must be one of none, llama3, got 'yarn'"),
        (
            {"rope_scaling": "llama3", "rope_low_freq_factor": 4.0},
            "model.rope_high_freq_factor must exceed model.rope_low_freq_factor=4.0, got 4.0",
        ),
        ({"rope_scaling": "llama3", "rope_factor": 0.5}, "model.rope_factor must be a finite number in \\[1.0, inf\\)"),
        ({"norm_eps": 0.0}, "model.norm_eps must be a finite number in \\(0.0, inf\\), got 0.0"),
        ({"norm_eps": 1.0}, "model.norm_eps must be in \\(0, 1\\), got 1.0"),
        ({"norm_type": "batchnorm"}, "model.norm_type must be one of layernorm, rmsnorm, got 'batchnorm'"),
        ({"mlp": "geglu"}, "model.mlp must be one of gelu, gelu_exact, relu, swiglu, got 'geglu'"),
        ({"kv_heads": -1}, "model.kv_heads must be an int >= 0"),
        ({"kv_heads": 3}, "model.num_heads=4 must be divisible by model.kv_heads .*got 3"),
        ({"attention_kernel": "flash"}, "model.attention_kernel must be one of auto, xla, cudnn, splash, got 'flash'"),
        ({"remat": "some"}, "model.remat must be one of auto, none, dots, full, got 'some'"),
    ],
)
def test_invalid_new_model_values_are_refused_naming_the_value_and_rule(changes, message):
    with pytest.raises(ValueError, match=message):
        build_model(dataclasses.replace(TINY, **changes), V)


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="cudnn is available on a GPU")
def test_cudnn_kernel_is_refused_without_a_gpu():
    with pytest.raises(ValueError, match="model.attention_kernel=cudnn needs a GPU, but the run.s devices are .cpu."):
        build_model(dataclasses.replace(TINY, attention_kernel="cudnn"), V, dtype=jnp.bfloat16)


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("model.kv_heads=2", f"model.kv_heads applies to model.kind in \\({', '.join(ATTENTION)}\\), not 'rnn'"),
        ("model.scan_layers=true", "model.scan_layers applies to model.kind in"),
        ("model.kv_heads=two", "model.kv_heads must be int, got 'two'"),
        ("model.bias=maybe", "model.bias must be bool, got 'maybe'"),
    ],
)
def test_new_model_keys_for_another_kind_or_of_the_wrong_type_are_refused(assignment, message):
    with pytest.raises(ValueError, match=message):
        override(Config(model=ModelConfig(kind="rnn")), [assignment])


def test_a_checkpoint_does_not_resume_across_scan_layers(tmp_path):
    """Its parameters are laid out for one setting; the run's config check names the key."""
    scanned = Config(model=dataclasses.replace(MODERN, scan_layers=True))
    checkpointer = RunDir(str(tmp_path)).checkpointer(1)
    state = TrainState(jnp.zeros((), jnp.int32), {"w": jnp.zeros(2)}, {}, jax.random.PRNGKey(0))
    checkpointer.save(state, {"data_position": 0, "config": to_dict(scanned), "tokenizer": ""})
    checkpointer.wait()
    unrolled = Config(model=dataclasses.replace(MODERN, scan_layers=False))
    with pytest.raises(ValueError, match="model.scan_layers: checkpoint has True, now False"):
        open_run(unrolled, str(tmp_path), checkpointer)
    checkpointer.close()
