"""Targets by name, and the clear errors of a name, a slice count or a plugin that will not do."""

import importlib.util

import pytest

from seqjax.accelerators import targets
from seqjax.accelerators.targets import parse_target, target_devices


@pytest.mark.parametrize(
    "name, slices, count, platform",
    [("h100:8", 1, 8, "gpu"), ("a100:4", 1, 4, "gpu"), ("h200:16", 1, 16, "gpu"), ("v5e:2x2", 1, 4, "tpu")],
)
def test_a_target_name_gives_its_device_count_and_platform(name, slices, count, platform):
    target = parse_target(name, slices)
    assert (target.count, target.chip.platform) == (count, platform)


def test_slices_multiply_a_tpu_topology():
    target = parse_target("v5p:4x4x4", slices=2)
    assert (target.devices_per_slice, target.count) == (64, 128)
    assert "2 slices" in target.describe()


@pytest.mark.parametrize(
    "name, slices, message",
    [
        ("b300:8", 1, "unknown target 'b300:8': known kinds are h100, h200, a100, v4, v5e, v5p"),
        ("h100", 1, "after the kind comes COUNT, e.g. h100:8"),
        ("v5p:4xx4", 1, "after the kind comes chips per axis, e.g. v5p:4x4x4"),
        ("h100:12", 1, "COUNT <= 8 or a multiple of 8"),
        ("h100:8", 2, "--slices joins TPU slices"),
        ("v5e:2x2", 0, "--slices must be a positive integer, got 0"),
    ],
)
def test_a_bad_target_is_one_clear_error(name, slices, message):
    with pytest.raises(ValueError, match=message):
        parse_target(name, slices)


@pytest.mark.parametrize("name, extra", [("h100:8", "gpu"), ("v5e:2x2", "tpu")])
def test_a_missing_plugin_names_the_pip_line_to_run(monkeypatch, name, extra):
    monkeypatch.setattr(importlib.util, "find_spec", lambda module: None)
    with pytest.raises(ValueError, match=rf"pip install 'seqjax\[{extra}\]'"):
        target_devices(parse_target(name))


def test_each_gpu_description_names_its_card_and_memory():
    for kind in ("h100", "h200", "a100"):
        text = targets.gpu_description(kind)
        assert f"device_memory_size: {targets.CHIPS[kind].memory_bytes}" in text
        assert "cuda_compute_capability" in text


def test_seqjax_compile_with_an_unknown_target_lists_the_known_ones(capsys):
    from seqjax.cli import main

    assert main(["compile", "--target", "b300:8"]) == 2
    assert "unknown target 'b300:8': known kinds are h100, h200, a100" in capsys.readouterr().err
