"""The run's steps built from abstract state and batch: the batch spec is the loader's, and the
train, eval and decode programs compile for a mesh of simulated CPU devices without a
parameter being made or, with a vocabulary size, any data read."""

from types import SimpleNamespace

import jax
import numpy as np
import pytest
from tiny_runs import tiny_config

from seqjax.accelerators.abstract_run import abstract_batch, compiled_programs, zipf_counts
from seqjax.models import kernel_choice
from seqjax.training.core.experiment import build_experiment, run_model
from seqjax.training.core.layout import make_mesh
from seqjax.training.features.evaluation import eval_batches

CASES = {
    "lm": (),
    "packed_lm": ("data.packing=true",),
    "seq2seq": ("data.task=reverse", "model.kind=transformer_seq2seq"),
    "packed_seq2seq": ("data.task=reverse", "model.kind=transformer_seq2seq", "data.packing=true"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_abstract_batch_has_the_keys_dtypes_and_rows_of_the_runs_batches(name):
    cfg = tiny_config(*CASES[name])
    exp = build_experiment(cfg)
    mesh = make_mesh(cfg.train.mesh, jax.devices()[:1])
    for split, real in (("train", exp.train_batches().batch(0)), ("valid", next(eval_batches(cfg, exp.data, "valid")))):
        spec = abstract_batch(cfg, mesh, split)
        assert set(spec) == set(real), split
        for key, struct in spec.items():
            assert struct.dtype == real[key].dtype, key
            assert struct.shape[0] == real[key].shape[0] and struct.shape[1] >= real[key].shape[1], key


def test_a_token_budget_run_compiles_the_rows_its_longest_bucket_holds():
    cfg = tiny_config("data.task=reverse", "model.kind=transformer_seq2seq", "data.max_tokens=1000")
    batch = abstract_batch(cfg, make_mesh(cfg.train.mesh, jax.devices()[:2]))
    assert batch["src"].shape == (14, 64)  # 1000 // 64 = 15 rows, down to a multiple of the 2 data devices


def test_a_packed_lm_compiles_the_eval_step_it_evaluates_with_on_packed_rows():
    built = compiled_programs(tiny_config("data.packing=true"), jax.devices()[:1])
    (_, batch), _ = built["eval"].args_info
    assert {"segment_ids", "positions"} <= set(batch)


def test_the_train_eval_and_decode_steps_compile_for_a_sharded_mesh_from_abstract_state():
    cfg = tiny_config("train.sharding=fsdp", "train.mesh=data:4,model:2", "train.sharding=fsdp_tensor")
    built = compiled_programs(cfg, jax.devices()[:8])
    assert dict(built["mesh"].shape) == {"slice": 1, "data": 4, "model": 2}
    assert all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree.leaves(built["state"]))
    for name in ("train", "eval", "decode"):
        assert built[name].memory_analysis() is not None


def test_a_vocabulary_size_compiles_without_reading_any_data(tmp_path):
    cfg = tiny_config("data.kind=text", f"data.train={tmp_path}/absent.txt", "head.kind=tree")
    built = compiled_programs(cfg, jax.devices()[:1], vocab_size=1000)
    assert built["parts"].counts.shape == (1000,)
    assert built["state"].params["head"]["node_weights"].shape[0] == 999  # a tree over the 1,000 words


def test_an_encoder_has_no_decode_step():
    cfg = tiny_config("model.kind=transformer_encoder", "objective.kind=masked_lm")
    assert compiled_programs(cfg, jax.devices()[:1])["decode"] is None


def test_zipf_counts_fall_with_rank():
    counts = zipf_counts(100)
    assert counts[0] == 10**9 and np.all(np.diff(counts) <= 0) and counts[-1] >= 1


H100, A100 = (SimpleNamespace(platform="gpu", compute_capability=c) for c in ("9.0", "8.0"))
TPU, CPU = SimpleNamespace(platform="tpu"), SimpleNamespace(platform="cpu")
PACKED = ("data.packing=true", "data.max_segments=8")


@pytest.mark.parametrize(
    "device, overrides, notice",
    [
        (H100, ("data.packing=true",), "takes packed rows only with a bound on their segments (data.max_segments"),
        (H100, PACKED, None),
        (A100, PACKED, "takes packed rows on GPUs of compute capability 9.0 or newer, the run's is 8.0"),
        (H100, ("model.window=4", "model.dilation=2"), "has no dilated window (model.dilation > 1)"),
        (H100, (), None),
        (
            TPU,
            ("model.d_model=256", "model.num_heads=2"),
            "tiles rows by 128 tokens: rows of 16 tokens attend on XLA",
        ),
        (TPU, ("model.d_model=256", "model.num_heads=2", "data.seq_len=128", "data.packing=true"), None),
        (CPU, ("data.packing=true",), None),
        (H100, ("model.kind=rnn",), None),
    ],
)
def test_a_fused_kernel_that_leaves_attention_to_xla_says_why(device, overrides, notice):
    cfg = tiny_config("train.precision=bfloat16", *overrides)
    choice = kernel_choice(run_model(cfg, 40, device))
    got = None if choice is None else choice.fallback
    assert got is None if notice is None else notice in got


@pytest.mark.parametrize(
    "device, overrides, notice",
    [
        (
            H100,
            ("model.d_model=36", "model.num_heads=3"),
            "cuDNN's fused attention takes heads (model.head_dim, else d_model / num_heads) of a multiple of 8 "
            "and at most 128 features, got 12: XLA runs instead",
        ),
        (
            H100,
            ("train.precision=float32",),
            "cuDNN's fused attention takes bfloat16 or float16 operands (train.precision), got float32: XLA runs "
            "instead",
        ),
    ],
)
def test_auto_says_which_kernel_made_for_the_devices_it_passed_over_and_why(device, overrides, notice):
    cfg = tiny_config("train.precision=bfloat16", *overrides)
    choice = kernel_choice(run_model(cfg, 40, device))
    assert choice is not None and choice.kernel == "xla" and choice.fallback == notice


@pytest.mark.parametrize("seq_len, fallback", [(128, None), (16, "tiles rows by 128 tokens: rows of 16 tokens")])
def test_auto_pads_heads_narrower_than_the_splash_kernels_tiles_on_a_tpu_and_says_so(seq_len, fallback):
    cfg = tiny_config("train.precision=bfloat16", "model.d_model=128", "model.num_heads=2", f"data.seq_len={seq_len}")
    choice = kernel_choice(run_model(cfg, 40, TPU))
    assert (choice.kernel, choice.padded_heads) == ("splash", (64, 128))
    assert choice.describe() == "splash (heads padded from 64 to 128 features)"
    assert choice.fallback is None if fallback is None else fallback in choice.fallback


def test_heads_as_wide_as_the_splash_kernels_tiles_are_not_padded():
    cfg = tiny_config("train.precision=bfloat16", "model.d_model=256", "model.num_heads=2", "data.seq_len=128")
    choice = kernel_choice(run_model(cfg, 40, TPU))
    assert (choice.kernel, choice.padded_heads, choice.describe()) == ("splash", None, "splash")


@pytest.mark.parametrize("device, bound", [(H100, 8), (A100, 0)])
def test_the_model_carries_the_segment_bound_only_where_its_kernel_takes_packed_rows(device, bound):
    choice = kernel_choice(run_model(tiny_config("train.precision=bfloat16", *PACKED), 40, device))
    assert choice is not None and choice.kernel == "cudnn" and choice.max_segments == bound
