"""`seqjax compile`'s report from compiled programs whose figures are given: memory against the
share of a device a run may use, the compiler's FLOPs scaled to the whole step, the roofline
and MFU, and the lines printed. The programs are stand-ins (their text, memory and cost), so
nothing is compiled."""

import types

import jax
import jax.numpy as jnp
import pytest

from seqjax.accelerators import report, targets
from seqjax.config import Config, override
from seqjax.models import build_model
from seqjax.training.core.mfu import train_flops_per_token

ROWS, LENGTH, VOCAB = 8, 16, 64
PARAMETERS, OPTIMIZER = 4000, 8000  # float32 values held per device
# One all-reduce of 1,000 float32 gradients per train step.
TRAIN_HLO = "  %all-reduce.1 = f32[1000]{0} all-reduce(%g), channel_id=1, to_apply=%add\n"


def held(count):
    """`count` float32 values on one device, as an abstract state leaf."""
    return jax.ShapeDtypeStruct((count,), jnp.float32, sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]))


def stand_in(arguments, outputs, temporaries, aliased=0, cost=None, text=""):
    """A compiled program as the report reads it: its text, memory analysis and cost."""
    stats = types.SimpleNamespace(
        argument_size_in_bytes=arguments,
        output_size_in_bytes=outputs,
        alias_size_in_bytes=aliased,
        temp_size_in_bytes=temporaries,
    )
    return types.SimpleNamespace(as_text=lambda: text, memory_analysis=lambda: stats, cost_analysis=lambda: cost)


def compile_report(monkeypatch, target, train, *settings, eval_program=None):
    """`report.compile_report` of a default LM under `settings` whose train step is `train`."""
    cfg = override(Config(), list(settings))
    built = {
        "mesh": types.SimpleNamespace(shape={"data": target.count, "model": 1}),
        "parts": types.SimpleNamespace(
            cfg=cfg,
            counts=None,
            head=types.SimpleNamespace(matmul_weights=lambda width, counts: width * VOCAB),
            model=build_model(cfg.model, VOCAB, platform=target.chip.platform),
        ),
        "state": types.SimpleNamespace(params={"w": held(PARAMETERS)}, opt_state={"m": held(OPTIMIZER)}),
        "batch": {"mask": jax.ShapeDtypeStruct((ROWS, LENGTH), jnp.float32)},
        "train": train,
        "eval": eval_program or stand_in(100, 10, 50),
        "decode": None,
        "remat": None,
    }
    monkeypatch.setattr(report, "target_devices", lambda target: [])
    monkeypatch.setattr(report, "abstract_run", lambda *args, **kwargs: {**built, "placer": None})
    monkeypatch.setattr(report, "compile_run", lambda *args, **kwargs: built)
    return cfg, report.compile_report(cfg, target, VOCAB)


H100 = targets.parse_target("h100:8")
V5E = targets.parse_target("v5e:2x2")
GPU_USABLE = int(0.75 * H100.chip.memory_bytes)  # JAX's allocator takes 75% of a GPU by default


@pytest.mark.parametrize("spare", [0, -1, 2**30])
def test_a_gpu_run_fits_the_share_jax_allocates_and_its_margin_is_against_that_share(monkeypatch, spare):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    arguments, outputs, aliased = 3 * 2**30, 2 * 2**30, 2**30
    temporaries = GPU_USABLE - spare - (arguments + outputs - aliased)  # peak = usable - spare
    _, got = compile_report(monkeypatch, H100, stand_in(arguments, outputs, temporaries, aliased))
    assert got["usable_memory_bytes"] == GPU_USABLE
    assert got["device_memory_bytes"] == H100.chip.memory_bytes
    assert got["per_device_bytes"]["peak"] == GPU_USABLE - spare
    assert got["margin_bytes"] == spare
    assert got["fits"] == (spare >= 0)
    assert bool(report.problems(got)) == (spare < 0)


def test_a_gpu_share_set_by_xla_python_client_mem_fraction_is_the_usable_memory(monkeypatch):
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
    _, got = compile_report(monkeypatch, H100, stand_in(2**30, 0, 0))
    assert got["usable_memory_bytes"] == int(0.5 * H100.chip.memory_bytes)
    assert got["margin_bytes"] == int(0.5 * H100.chip.memory_bytes) - 2**30


def test_a_tpu_run_may_use_its_whole_hbm():
    assert report.usable_memory(V5E) == 16 * 2**30


def test_the_peak_is_the_largest_of_the_programs(monkeypatch):
    _, got = compile_report(monkeypatch, V5E, stand_in(10, 20, 30, aliased=5), eval_program=stand_in(100, 1, 1))
    assert got["per_device_bytes"]["peak"] == 102
    assert got["per_device_bytes"]["temporaries"] == 30  # the train step's
    assert got["per_device_bytes"]["parameters"] == 4 * PARAMETERS
    assert got["per_device_bytes"]["optimizer_state"] == 4 * OPTIMIZER


@pytest.mark.parametrize("accumulated", [1, 4])
def test_the_compilers_flops_are_the_whole_step_of_every_device_and_microbatch(monkeypatch, accumulated):
    """The compiler's count is one device's program, whose microbatch loop it counts once."""
    cost = {"flops": 3e9, "bytes accessed": 1e9}
    _, got = compile_report(monkeypatch, V5E, stand_in(1, 1, 1, cost=cost), f"optim.accum_steps={accumulated}")
    assert got["flops_per_step"]["compiler"] == 3e9 * 4 * accumulated


def test_the_tpu_roofline_and_mfu_follow_their_equations(monkeypatch):
    cost = {"flops": 3e9, "bytes accessed": 2e9}
    cfg, got = compile_report(monkeypatch, V5E, stand_in(1, 1, 1, cost=cost, text=TRAIN_HLO))
    chip = V5E.chip
    model_flops = train_flops_per_token(cfg, cfg.model.d_model * VOCAB, LENGTH) * ROWS * LENGTH
    compute = model_flops / (4 * 197e12)  # v5e: 197 TFLOP/s of bf16 per chip
    memory = 2e9 / 0.82e12  # the compiler's bytes per device over its 819 GB/s
    links = 4000 / chip.link_bandwidth
    assert got["tokens_per_step"] == ROWS * LENGTH
    assert got["flops_per_step"]["model"] == model_flops
    assert got["collective_bytes_per_step"] == 4000
    # a TPU has no measured steps to calibrate an estimate: the roofline is stated as a bound only
    assert got["predicted_step_seconds"] is None and got["predicted_mfu"] is None
    bound = max(compute, memory) + links
    assert got["roofline"]["step"] == pytest.approx(bound)
    assert got["estimate"]["step_seconds_at_least"] == pytest.approx(bound)
    assert got["estimate"]["mfu_at_most"] == pytest.approx(model_flops / (bound * 4 * 197e12))


def test_a_gpu_roofline_moves_each_buffer_of_the_train_step_once(monkeypatch):
    """The GPU compiler gives no cost: the bytes moved are the train step's arguments, outputs
    and temporaries, each read or written once."""
    _, got = compile_report(monkeypatch, H100, stand_in(2**30, 2**29, 2**28, aliased=2**29, cost=None))
    assert got["flops_per_step"]["compiler"] is None
    assert got["roofline"]["memory_seconds"] == pytest.approx((2**30 + 2**29 + 2**28) / 3.35e12)


def test_the_printed_memory_line_states_the_margin_against_the_usable_share(monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    _, got = compile_report(monkeypatch, H100, stand_in(GPU_USABLE + 2**30, 0, 0))
    line = report.describe(got).splitlines()[1]
    assert "of 59.33 GiB usable: DOES NOT FIT (margin 1.00 GiB short)" in line


def test_a_step_the_compiler_refused_has_its_margin_against_the_usable_share(monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    refusal = report.OutOfMemory("RESOURCE_EXHAUSTED: temporaries (2.00G) exceeds the memory")
    built = {
        "mesh": types.SimpleNamespace(shape={"data": 8}),
        "parts": types.SimpleNamespace(cfg=Config()),
        "state": types.SimpleNamespace(params={"w": held(PARAMETERS)}, opt_state={"m": held(OPTIMIZER)}),
    }
    got = report.out_of_memory_report(H100, built, refusal)
    peak = 4 * PARAMETERS + 4 * OPTIMIZER + 2 * 2**30
    assert (got["per_device_bytes"]["peak"], got["fits"]) == (peak, False)
    assert got["margin_bytes"] == GPU_USABLE - peak
