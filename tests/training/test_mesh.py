import jax
import pytest

from seqjax.training.core.layout import check_batch_size, make_mesh, parse_mesh


def test_minus_one_takes_the_remaining_devices():
    assert parse_mesh("data:-1,model:2", 8) == {"slice": 1, "data": 4, "model": 2}
    assert parse_mesh("data:-1", 1) == {"slice": 1, "data": 1, "model": 1}
    assert parse_mesh("slice:2,data:-1,model:2", 16) == {"slice": 2, "data": 4, "model": 2}


@pytest.mark.parametrize(
    "spec, message",
    [
        ("data:3", "needs 3 devices, but 8 are available: e.g. data:8,model:1, or data:-1"),
        ("data:2,model:2", "needs 4 devices, but 8 are available: e.g. data:4,model:2, or data:-1"),
        ("data:3,model:-1", "does not divide"),
        ("pipe:2", "AXIS:SIZE"),
        ("data:x", "integer"),
        ("data:-1,model:-1", "at most one"),
        ("data:0", "positive"),
    ],
)
def test_impossible_meshes_are_clear_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_mesh(spec, 8)


def test_mesh_over_simulated_devices_has_named_axes():
    mesh = make_mesh("data:4,model:2", jax.devices()[:8])
    assert dict(mesh.shape) == {"slice": 1, "data": 4, "model": 2}


def test_a_slice_axis_must_count_the_slices_the_devices_are_in():
    with pytest.raises(ValueError, match="has slice:2, but the devices are in 1 slice"):
        make_mesh("slice:2,data:4", jax.devices()[:8])


def test_batch_must_divide_over_the_data_axis():
    mesh = make_mesh("data:8", jax.devices()[:8])
    with pytest.raises(ValueError, match="divisible by the data axis size 8, got 12"):
        check_batch_size(12, mesh)
