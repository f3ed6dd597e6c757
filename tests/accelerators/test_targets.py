"""Targets by name, and the clear errors of a name, a slice count or a plugin that will not do."""

import importlib.util
import types

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


@pytest.mark.parametrize("name, count", [("h100:1", 1), ("h100:8", 8), ("h200:16", 16), ("a100:24", 24)])
def test_a_gpu_target_is_up_to_one_host_of_eight_or_whole_hosts(name, count):
    assert parse_target(name).count == count


@pytest.mark.parametrize("name", ["h100:9", "h100:12", "h100:8x2"])
def test_a_gpu_count_beyond_one_host_that_is_not_whole_hosts_is_refused(name):
    with pytest.raises(ValueError, match="a GPU target is kind:COUNT, COUNT <= 8 or a multiple of 8"):
        parse_target(name)


@pytest.mark.parametrize("name", ["h100:0", "v5e:2x0", "v5e:", "v4:x2"])
def test_a_count_or_axis_below_one_is_refused(name):
    with pytest.raises(ValueError, match="after the kind comes"):
        parse_target(name)


@pytest.mark.parametrize(
    "name, slices, args, kwargs",
    [
        ("h100:4", 1, ("h100", "cuda"), {"topology": "1x1x4"}),
        ("h100:8", 1, ("h100", "cuda"), {"topology": "1x1x8"}),
        ("h200:16", 1, ("h200", "cuda"), {"topology": "1x2x8"}),  # two hosts of eight
        ("v5p:2x2x2", 2, (), {"topology_name": "v5p:2x2x2", "platform": "tpu", "num_slices": 2}),
        ("V5E:2x4", 1, (), {"topology_name": "v5e:2x4", "platform": "tpu", "num_slices": 1}),
    ],
)
def test_the_devices_of_a_target_are_described_as_its_hosts_or_its_topology_and_slices(
    monkeypatch, name, slices, args, kwargs
):
    from jax.experimental import topologies

    described = []

    def describe(*given_args, **given_kwargs):
        described.append((given_args, {k: v for k, v in given_kwargs.items() if k != "target_config"}))
        return types.SimpleNamespace(devices=["device"])

    monkeypatch.setattr(topologies, "get_topology_desc", describe)
    monkeypatch.setattr(targets, "_require_plugin", lambda chip: None)
    assert target_devices(parse_target(name, slices)) == ["device"]
    assert described == [(args, kwargs)]
