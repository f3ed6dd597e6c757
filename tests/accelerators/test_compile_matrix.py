"""The compile matrix: four runs under the layouts a researcher launches, compiled for 8 x H100
and a TPU v5e 2x2 (and two v5p slices) from this CPU. Each must compile, fit, and use the fused
attention kernel wherever its mask lets it (and say why where it does not).

Needs JAX's CUDA and TPU plugins (`pip install -e '.[gpu,tpu]'`); skipped without them. CI
installs them after the test suite and runs this file.
"""

import importlib.util

import pytest

from seqjax import config as config_lib
from seqjax.config import Config

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax_plugins") is None or importlib.util.find_spec("libtpu") is None,
    reason="needs seqjax[gpu] and seqjax[tpu] (JAX's CUDA and TPU plugins)",
)

RUNS = {
    "default_lm": (),
    # Llama's blocks (grouped-query attention) with packed rows of at most 16 segments; heads 128
    # wide and rows of 128 tokens, the splash kernel's tiles.
    "modern_lm": (
        "model.d_model=512",
        "model.num_heads=4",
        "model.kv_heads=2",
        "model.d_ff=1024",
        "model.positions=rope",
        "model.norm_type=rmsnorm",
        "model.mlp=swiglu",
        "model.bias=false",
        "data.seq_len=128",
        "data.packing=true",
        "data.max_segments=16",
    ),
    "transformer_seq2seq": ("data.task=reverse", "model.kind=transformer_seq2seq"),
    "lstm_sampled": ("model.kind=rnn", "head.kind=sampled", "head.num_samples=32"),
}
LAYOUTS = {
    "h100_data": ("h100:8", "train.sharding=data"),
    "h100_fsdp": ("h100:8", "train.sharding=fsdp"),
    "h100_fsdp_tensor": ("h100:8", "train.sharding=fsdp_tensor", "train.mesh=data:4,model:2"),
    "v5e_fsdp": ("v5e:2x2", "train.sharding=fsdp"),
}


def compiled(run: str, target: str, *layout: str, slices: int = 1):
    from seqjax.accelerators.report import compile_report
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    cfg = config_lib.override(Config(), ["train.precision=bfloat16", *RUNS[run], *layout])
    return compile_report(cfg, parse_target(target, slices))


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("run", list(RUNS))
def test_each_run_compiles_fits_and_uses_the_fused_kernel_where_its_mask_allows(run, layout):
    target, *overrides = LAYOUTS[layout]
    report = compiled(run, target, *overrides)
    assert report["fits"], report["per_device_bytes"]
    attention = report["attention"]
    if run == "lstm_sampled":
        assert attention["requested"] is None
        # Batch-major, the input projection's rows stay split: beyond the parameters' gathers, no
        # collective moves the whole batch's [T*B, 4H] float32 product (time-major, one did).
        projection = 64 * 32 * 4 * 128 * 4
        moved = sum(entry["bytes"] for kind, entry in report["collectives"].items() if kind != "all-gather")
        assert moved < projection, report["collectives"]
        return
    fused = attention["resolved"] in ("cudnn", "splash")
    # On v5e the default runs' 64-wide heads are padded onto splash; their short rows attend on XLA.
    expected = {"h100": "cudnn", "v5e": "splash"}[target.split(":")[0]]
    assert attention["resolved"] == expected  # auto, resolved for the target's devices
    if fused and attention["fallback"] is None:
        assert attention["fused_calls"] > 0, attention
    else:
        assert attention["fused_calls"] == 0
    if target.startswith("h100"):  # packed rows too, in cuDNN's packed layout
        assert attention["fallback"] is None and attention["fused_calls"] > 0, attention


def test_packed_rows_in_scanned_rematerialized_blocks_reach_cudnn_in_the_backward_pass_too():
    """A scanned block's backward pass is traced after its forward, where cuDNN's packed layout is
    checked again against a GPU this machine does not have."""
    report = compiled("modern_lm", "h100:1", "model.scan_layers=true", "model.remat=full")
    attention = report["attention"]
    assert attention["fallback"] is None and attention["fused_calls"] > 0, attention


@pytest.mark.parametrize("kernel", ["splash", "auto"])
def test_heads_narrower_than_the_splash_tiles_run_padded_on_it_named_or_chosen_by_auto(kernel):
    from seqjax.accelerators.report import describe

    # Llama 3.2 1B's 64-wide heads; one layer: each holds the same attention
    narrow = ("model.num_heads=8", f"model.attention_kernel={kernel}", "model.layers=1")
    report = compiled("modern_lm", "v5e:2x2", "train.sharding=fsdp", *narrow)
    attention = report["attention"]
    assert attention["resolved"] == "splash" and attention["fused_calls"] > 0, attention
    assert attention["padded_heads"] == [64, 128] and attention["fallback"] is None
    assert "resolved splash (heads padded from 64 to 128 features)" in describe(report)


def test_a_run_over_two_slices_all_reduces_its_gradients_across_them_and_gathers_within():
    report = compiled("default_lm", "v5p:2x2x2", "train.sharding=fsdp", slices=2)
    assert report["mesh"] == {"slice": 2, "data": 8, "model": 1}
    assert "all-reduce" in report["dcn_collectives"]
    assert "all-gather" in report["collectives"]  # FSDP's parameter gathers stay on the slice's ICI


def test_a_run_that_does_not_fit_exits_non_zero_with_its_memory_per_device(capsys):
    from seqjax.cli import main

    big = ["model.d_model=4096", "model.layers=8", "model.num_heads=32", "model.d_ff=16384", "train.sharding=data"]
    # A policy named, not auto: the report of the one program (auto refuses before it, naming each policy's peak).
    big.append("model.remat=none")
    code = main(["compile", "--target", "v5e:2x2", "--vocab-size", "32000", "--set", *big, "model.scan_layers=true"])
    captured = capsys.readouterr()
    assert code == 1
    assert "DOES NOT FIT" in captured.out and "optimizer state" in captured.out
    assert "seqjax: does not fit:" in captured.err


def test_a_mesh_that_does_not_match_the_target_names_sizes_that_would(capsys):
    from seqjax.cli import main

    assert main(["compile", "--target", "h100:8", "--set", "train.mesh=data:3"]) == 2
    assert "needs 3 devices, but 8 are available: e.g. data:8,model:1" in capsys.readouterr().err


def test_the_blocked_full_softmax_under_fsdp_gathers_its_table_once_not_at_every_block():
    from seqjax.accelerators.report import compile_report
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    vocab, width = 65536, 256  # 16 blocks of 4,096 words
    overrides = ["model.kind=rnn", f"model.d_model={width}", "train.sharding=fsdp", "train.precision=bfloat16"]
    report = compile_report(config_lib.override(Config(), overrides), parse_target("h100:8"), vocab)
    table = vocab * width * 4
    gathered = report["collectives"]["all-gather"]["bytes"]
    assert gathered < 4 * table  # the table and its gradient's pass, not 16 blocks x 2 passes of it


def test_the_class_head_under_fsdp_gathers_its_table_once_and_each_device_walks_its_own_rows():
    """Each step of the walk reads a window of the table and the rows of one class: left to the
    compiler, the table was all-gathered at every step (771 tables' bytes per train step here)."""
    from seqjax.accelerators.report import compile_report
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    vocab, width = 65536, 256
    overrides = ["model.kind=rnn", f"model.d_model={width}", "train.sharding=fsdp", "train.precision=bfloat16"]
    overrides.append("head.kind=class")
    report = compile_report(config_lib.override(Config(), overrides), parse_target("h100:8"), vocab)
    table = vocab * width * 4
    assert report["collectives"]["all-gather"]["bytes"] < 4 * table
    assert sum(entry["bytes"] for entry in report["collectives"].values()) < 4 * table


def test_the_full_heads_row_blocks_under_data_parallelism_stay_on_each_device():
    """The full head's masked mean over blocks of rows (its exponentials over the keep limit):
    left to the compiler, the scan over rows split across devices gathered every row to every
    device (12 GiB per step for a 125M LM on 8 x H100); each device walks its own rows, and the
    table's gradient is what is summed."""
    from seqjax.accelerators.report import compile_report
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    vocab, rows = 65536, 8 * 8 * 2048  # 16,384 rows a device: 2 GiB of bfloat16 exponentials
    overrides = ["train.sharding=data", "data.seq_len=2048", "model.max_len=2048", f"train.batch_size={rows // 2048}"]
    cfg = config_lib.override(Config(), [*overrides, "train.precision=bfloat16"])
    report = compile_report(cfg, parse_target("h100:8"), vocab)
    sent = sum(entry["bytes"] for entry in report["collectives"].values())
    # The gradients' all-reduce (every parameter, once), not the [N, D] rows at each block.
    assert sent < 1.5 * report["per_device_bytes"]["parameters"], report["collectives"]


@pytest.mark.parametrize("target", ["h100:1", "v5e:2x2"])
def test_a_program_compiled_here_for_an_accelerator_has_none_of_the_cpu_only_forms(target):
    import jax
    import jax.numpy as jnp
    from jaxpr_tools import equations

    from seqjax.accelerators.targets import parse_target, target_devices, use_target_compiler
    from seqjax.models.matmul.rows_matmul import row_major_transpose
    from seqjax.placement import under_mesh
    from seqjax.training.core.layout import make_mesh

    use_target_compiler()

    def barriers(devices):
        traced = under_mesh(row_major_transpose, make_mesh("data:-1", devices))
        return list(equations(jax.make_jaxpr(traced)(jnp.ones((4, 3))).jaxpr, "optimization_barrier"))

    assert barriers(jax.devices()[:1])  # on this CPU, the row-major copy
    assert not barriers(target_devices(parse_target(target)))


def test_a_report_made_twice_under_a_persistent_cache_writes_no_entry_to_read_back_and_keeps_the_setting():
    """The suite runs under a persistent compilation cache (tests/conftest.py). A target's
    executable written there would be read back by the second report, which cannot load it here
    and warns; the warnings are errors here."""
    import warnings

    import jax
    from tiny_runs import tiny_config

    from seqjax.accelerators.report import compile_report
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    assert jax.config.jax_compilation_cache_dir
    before = jax.config.jax_persistent_cache_min_compile_time_secs
    cfg = config_lib.override(tiny_config(), ["train.precision=bfloat16"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reports = [compile_report(cfg, parse_target("h100:1")) for _ in range(2)]
    assert reports[0]["per_device_bytes"] == reports[1]["per_device_bytes"]
    assert jax.config.jax_persistent_cache_min_compile_time_secs == before


@pytest.mark.parametrize("target", ["h100:1", "h200:1", "a100:1", "v4:2x2x1", "v5e:2x2", "v5p:2x2x1"])
def test_each_targets_devices_name_a_kind_whose_mfu_peak_is_the_targets(target):
    """A run's logged MFU (`mfu.known_peak_tflops` of its devices' device_kind) is against the
    peak `seqjax compile` predicts with for the same devices."""
    from seqjax.accelerators.targets import parse_target, target_devices, use_target_compiler
    from seqjax.training.core.mfu import known_peak_tflops

    use_target_compiler()
    chip = parse_target(target).chip
    assert known_peak_tflops(target_devices(parse_target(target))[0].device_kind) == chip.peak_tflops


# A Llama of about 1B parameters (docs/scaling.md's), layers scanned: compile time flat in depth.
LLAMA_1B = (
    "model.d_model=2048",
    "model.layers=24",
    "model.num_heads=16",
    "model.kv_heads=8",
    "model.d_ff=5632",
    "model.positions=rope",
    "model.norm_type=rmsnorm",
    "model.mlp=swiglu",
    "model.bias=false",
    "model.max_len=2048",
    "model.scan_layers=true",
    "data.seq_len=2048",
    "train.precision=bfloat16",
    "train.sharding=fsdp",
)


@pytest.mark.slow
def test_auto_remat_takes_dots_where_the_step_without_remat_does_not_fit_an_h100():
    from seqjax.accelerators.report import compile_report, describe
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    # 16 rows of 2,048 tokens per device: without remat the activations alone exceed 60 GiB.
    cfg = config_lib.override(Config(), [*LLAMA_1B, "train.batch_size=128"])
    report = compile_report(cfg, parse_target("h100:8"), 32000)
    remat, usable = report["remat"], report["usable_memory_bytes"]
    assert (remat["requested"], remat["policy"], list(remat["peaks"])) == ("auto", "dots", ["none", "dots"])
    assert remat["peaks"]["none"] > usable >= remat["peaks"]["dots"] == report["per_device_bytes"]["peak"]
    assert "remat: auto chose dots (none needs " in describe(report)
