"""`seqjax compile` answers from the state's shapes before compiling when parameters, optimizer
state and gradients alone exceed a device (a target with a tiny memory here, so that the tiny
run does not fit), and says which sharding or mesh would bring them under, with the bytes. The
H100 x 8 target's devices are this machine's 8 CPU devices: what is checked is the state's
shapes and shardings, which do not depend on the chip, and nothing is compiled."""

import dataclasses

import jax
import numpy as np
import pytest
from jax.sharding import AbstractMesh
from tiny_runs import tiny, tiny_config

from seqjax.accelerators import abstract_run as abstract_run_lib
from seqjax.accelerators import report as report_lib
from seqjax.accelerators import targets
from seqjax.accelerators.abstract_run import abstract_run
from seqjax.accelerators.state_fit import state_bytes
from seqjax.cli import main

TINY = ("model.d_model=32", "model.d_ff=64", "train.batch_size=8")
VOCAB = 64


@pytest.fixture(scope="module")
def run():
    """The tiny run's abstract state on 8 devices (data parallel): nothing compiled."""
    return abstract_run(tiny_config(*TINY), jax.devices()[:8], VOCAB)


def with_memory(monkeypatch, usable):
    """An H100 x 8 whose usable memory per device (75% of it) is `usable` bytes, on this
    machine's 8 devices."""
    chip = dataclasses.replace(targets.CHIPS["h100"], memory_bytes=int(usable / report_lib.GPU_MEMORY_FRACTION) + 1)
    monkeypatch.setitem(targets.CHIPS, "h100", chip)
    monkeypatch.setattr(report_lib, "target_devices", lambda target: jax.devices()[: target.count])
    return targets.parse_target("h100:8")


def no_compiling(monkeypatch):
    def refuse(*_, **__):
        raise AssertionError("compiled a run whose state alone does not fit")

    monkeypatch.setattr(abstract_run_lib, "compile_train", refuse)


def test_the_state_bytes_under_data_parallelism_are_every_parameter_on_each_device(run):
    params = run["state"].params
    count = sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(params))
    needed = state_bytes(run["state"])
    assert needed["parameters"] == needed["gradients"] == 4 * count  # float32, replicated
    assert needed["optimizer_state"] >= 2 * needed["parameters"]  # Adam's two moments
    assert needed["total"] == 2 * needed["parameters"] + needed["optimizer_state"]
    fsdp = state_bytes(run["placer"](run["mesh"], "fsdp"))
    assert needed["total"] / 8 <= fsdp["total"] < needed["total"] / 4  # split over 8 but for small leaves


def test_a_state_over_the_device_is_reported_without_compiling_naming_fsdp_on_this_mesh(run, monkeypatch):
    fsdp = state_bytes(run["placer"](run["mesh"], "fsdp"))["total"]
    target = with_memory(monkeypatch, fsdp + 1)  # fits under FSDP, not replicated
    no_compiling(monkeypatch)
    report = report_lib.compile_report(tiny_config(*TINY), target, VOCAB)
    assert report["fits"] is False and report["compiled"] is False
    assert report["per_device_bytes"]["peak"] == state_bytes(run["state"])["total"]
    assert (
        report["remedies"][0] == f"train.sharding=fsdp on this mesh: {report_lib.format_bytes(fsdp)} per device (fits)"
    )
    assert not any("devices (train.mesh" in remedy for remedy in report["remedies"])  # this mesh is enough
    assert "scan_layers and model.remat" in report["remedies"][-1]
    assert report_lib.problems(report)[0].startswith("does not fit: ")


def test_a_state_over_the_device_even_under_fsdp_names_the_data_axis_that_brings_it_under(run, monkeypatch):
    over_8 = state_bytes(run["placer"](run["mesh"], "fsdp"))["total"]
    under_16 = state_bytes(run["placer"](AbstractMesh((1, 16, 1), ("slice", "data", "model")), "fsdp"))["total"]
    assert under_16 < over_8
    target = with_memory(monkeypatch, under_16)
    no_compiling(monkeypatch)
    report = report_lib.compile_report(tiny_config(*TINY), target, VOCAB)
    assert report["remedies"][:2] == [
        f"train.sharding=fsdp on this mesh: {report_lib.format_bytes(over_8)} per device (still over)",
        f"train.sharding=fsdp on 16 devices (train.mesh data:16): {report_lib.format_bytes(under_16)} per device",
    ]


def test_seqjax_compile_exits_1_at_once_with_the_remedies(run, monkeypatch, capsys):
    with_memory(monkeypatch, state_bytes(run["placer"](run["mesh"], "fsdp"))["total"] + 1)
    no_compiling(monkeypatch)
    assert main(["compile", "--target", "h100:8", "--vocab-size", str(VOCAB), "--set", *tiny(*TINY)]) == 1
    captured = capsys.readouterr()
    assert "DOES NOT FIT (not compiled)" in captured.out and "train.sharding=fsdp on this mesh: " in captured.out
    assert "seqjax: does not fit: " in captured.err and "compiling the train step" not in captured.err
