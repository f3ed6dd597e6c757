"""`model.remat=auto`: the lightest policy whose compiled train step fits a device, chosen from
the policies' peaks; on a CPU, which reports no memory limit, `none` without compiling any."""

import json

import jax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.training import loop
from seqjax.training.core import remat as remat_lib
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import make_mesh
from seqjax.training.core.remat import RematChoice, choose_remat, resolve_remat
from seqjax.training.core.steps import CompiledStep

GIB = 2**30


@pytest.mark.parametrize(
    "peaks, limit, chosen, asked",
    [
        ({"none": 10 * GIB, "dots": 6 * GIB, "full": 4 * GIB}, 12 * GIB, "none", ["none"]),
        ({"none": 12 * GIB, "dots": 6 * GIB, "full": 4 * GIB}, 12 * GIB, "none", ["none"]),  # at the limit fits
        ({"none": 20 * GIB, "dots": 6 * GIB, "full": 4 * GIB}, 12 * GIB, "dots", ["none", "dots"]),
        ({"none": 20 * GIB, "dots": 14 * GIB, "full": 4 * GIB}, 12 * GIB, "full", ["none", "dots", "full"]),
        ({"none": None, "dots": 6 * GIB, "full": 4 * GIB}, 12 * GIB, "dots", ["none", "dots"]),  # refused
    ],
)
def test_auto_chooses_the_lightest_policy_whose_peak_fits_and_compiles_none_past_it(peaks, limit, chosen, asked):
    calls = []

    def peak_of(policy):
        calls.append(policy)
        return peaks[policy]

    choice = choose_remat(peak_of, limit)
    assert (choice.policy, calls) == (chosen, asked)
    assert choice.peaks == {policy: peaks[policy] for policy in asked}


def test_when_no_policy_fits_the_error_lists_each_policys_peak_per_device():
    peaks = {"none": 90 * GIB, "dots": None, "full": 61 * GIB}
    with pytest.raises(ValueError) as raised:
        choose_remat(peaks.__getitem__, 60 * GIB)
    assert str(raised.value) == (
        "model.remat=auto: no policy's train step fits the 60.00 GiB a device may use, peaks per device: "
        "none 90.00 GiB, dots (refused by the compiler), full 61.00 GiB (lower train.batch_size, raise "
        "optim.accum_steps or shard the state: train.sharding=fsdp)"
    )


def test_the_printed_line_names_the_choice_and_the_peaks_of_the_policies_tried_against_the_limit():
    choice = RematChoice("auto", "full", {"none": 90 * GIB, "dots": 70 * GIB, "full": 30 * GIB}, 60 * GIB)
    line = "remat: auto chose full (none needs 90.00 GiB of 60.00 GiB, dots 70.00 GiB, full 30.00 GiB)"
    assert choice.describe() == line


def test_on_devices_that_report_no_memory_limit_auto_is_none_and_nothing_is_compiled():
    def peak_of(policy):
        raise AssertionError(f"compiled {policy}")

    choice = resolve_remat(tiny_config().model, "cpu", None, peak_of)
    assert choice.policy == "none"
    assert choice.describe() == "remat: auto chose none (cpu devices report no memory limit: no other policy compiled)"
    assert remat_lib.device_memory_limit(jax.devices("cpu")[0]) is None


def test_a_policy_set_by_name_is_kept_and_a_model_without_transformer_blocks_has_none():
    never = lambda policy: pytest.fail(f"compiled {policy}")  # noqa: E731
    assert resolve_remat(tiny_config("model.remat=dots").model, "gpu", GIB, never) == RematChoice("dots", "dots")
    assert resolve_remat(tiny_config("model.kind=rnn").model, "gpu", GIB, never) is None


@pytest.mark.slow
def test_a_run_whose_devices_hold_less_than_the_none_step_builds_its_model_with_dots(monkeypatch):
    # Scanned layers: on the CPU backend remat lowers the step's peak with scan_layers only (stack.py).
    cfg = tiny_config("model.scan_layers=true", "model.layers=2", "data.seq_len=32")
    mesh = make_mesh(cfg.train.mesh)
    exp = build_experiment(cfg, mesh)
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    batches = exp.train_batches()

    def run_remat_under(limit):
        monkeypatch.setattr(remat_lib, "device_memory_limit", lambda device: limit)
        return remat_lib.run_remat(exp, optimizer, schedule, mesh, batches.shapes, batches.batch(0))

    _, roomy, _ = run_remat_under(2**40)
    built, tight, ready = run_remat_under(roomy.peaks["none"] - 1)
    assert (roomy.policy, tight.policy) == ("none", "dots")
    assert tight.peaks["none"] == roomy.peaks["none"] > tight.peaks["dots"]
    assert (built.model.cfg.remat, built.cfg.model.remat) == ("dots", "auto")  # the config keeps auto
    assert ready.shape == max(batches.shapes) and ready.program.memory_analysis() is not None


def test_a_compiled_step_serves_only_a_state_of_its_own_shapes_dtypes_and_shardings():
    mesh = jax.make_mesh((8,), ("data",), devices=jax.devices("cpu")[:8])
    split, whole = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    state = {"w": jax.ShapeDtypeStruct((8, 4), "float32", sharding=split)}
    ready = CompiledStep((8, 16), state, program=object())
    assert ready.serves({"w": jax.device_put(jax.numpy.zeros((8, 4)), split)}, (8, 16))
    assert not ready.serves(state, (8, 32))
    assert not ready.serves({"w": jax.ShapeDtypeStruct((8, 4), "float32", sharding=whole)}, (8, 16))
    assert not ready.serves({"w": jax.ShapeDtypeStruct((8, 4), "bfloat16", sharding=split)}, (8, 16))
    assert not ready.serves({"v": state["w"]}, (8, 16))
    weak = jax.ShapeDtypeStruct((8, 4), "float32", sharding=split, weak_type=True)
    assert not ready.serves({"w": weak}, (8, 16))  # a compiled program refuses a weakly typed argument


@pytest.mark.slow
def test_a_run_runs_the_program_auto_compiled_to_choose_and_ends_as_a_run_of_that_policy_set_by_name(
    monkeypatch, tmp_path
):
    compiled = []
    compile_train_steps = loop.compile_train_steps

    def watched(train_step, state, shapes, example, sharding, ready=None):
        programs, abstract, seconds = compile_train_steps(train_step, state, shapes, example, sharding, ready)
        compiled.append((ready, programs))
        return programs, abstract, seconds

    monkeypatch.setattr(loop, "compile_train_steps", watched)
    monkeypatch.setattr(remat_lib, "device_memory_limit", lambda device: 2**40)
    overrides = ("train.steps=3", "model.dropout=0.0")
    for remat in ("auto", "none"):
        loop.train(tiny_config(*overrides, f"model.remat={remat}"), str(tmp_path / remat), echo=lambda _: None)
    (ready, programs), (no_ready, _) = compiled
    assert ready.program in programs.values() and no_ready is None
    got, want = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("auto", "none"))
    assert got == want


@pytest.mark.slow
def test_the_cpu_train_command_prints_that_auto_chose_none(tmp_path):
    lines = []
    cfg = tiny_config("train.steps=1")
    loop.train(cfg, str(tmp_path), echo=lines.append)
    assert "remat: auto chose none (cpu devices report no memory limit: no other policy compiled)" in lines
