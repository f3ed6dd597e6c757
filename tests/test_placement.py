"""`seqjax.placement`: the one sharding queries, keys and values share (`attention_spec`), on
meshes that split the batch, the heads, both, or neither, read from the arrays' shapes
[B, T, heads, Dh]; the rows each device holds (`device_rows`)."""

from types import SimpleNamespace

import jax
import pytest
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from seqjax.placement import attention_spec, device_rows, gpu_capability


def arrays(batch, length, *heads, width=16):
    """[B, T, heads, Dh] stand-ins, one per entry of `heads` (queries, then keys and values)."""
    return [jax.ShapeDtypeStruct((batch, length, h, width), "bfloat16") for h in heads]


def mesh(**axes):
    return AbstractMesh(tuple(axes.values()), tuple(axes))


@pytest.mark.parametrize(
    "axes, shapes, spec",
    [
        # Heads split over model where it divides the query heads and the key/value heads alike.
        (dict(data=2, model=4), (4, 8, 8, 4, 4), P("data", None, "model", None)),
        # Grouped-query: 2 key/value heads do not split 4 ways, so no array splits its heads.
        (dict(data=2, model=4), (4, 8, 8, 2, 2), P("data", None, None, None)),
        # A length the model axis divides does not make heads it does not divide split.
        (dict(data=2, model=4), (4, 8, 6, 6, 6), P("data", None, None, None)),
        # Rows a batch axis does not divide stay whole; the heads still split.
        (dict(data=2, model=4), (3, 8, 8, 8, 8), P(None, None, "model", None)),
        # A mesh of one model device splits no heads; one of one data device splits no rows.
        (dict(data=4, model=1), (4, 8, 8, 8, 8), P("data", None, None, None)),
        (dict(data=1, model=2), (4, 8, 8, 8, 8), P(None, None, "model", None)),
        # Across slices the rows split over slice and data together, when both divide them.
        (dict(slice=2, data=2, model=2), (4, 8, 2, 2, 2), P(("slice", "data"), None, "model", None)),
        (dict(slice=2, data=2, model=2), (2, 8, 2, 2, 2), P(None, None, "model", None)),
    ],
)
def test_attention_spec_splits_rows_and_heads_only_where_the_mesh_divides_every_array(axes, shapes, spec):
    batch, length, *heads = shapes
    assert attention_spec(mesh(**axes), *arrays(batch, length, *heads)) == spec


def test_the_head_width_and_the_length_are_never_split():
    spec = attention_spec(mesh(data=2, model=4), *arrays(4, 16, 8, width=64))
    assert spec[1] is None and spec[3] is None


@pytest.mark.parametrize(
    "device, capability",
    [
        (SimpleNamespace(platform="gpu", compute_capability="9.0"), (9, 0)),
        (SimpleNamespace(platform="gpu", compute_capability="12.1"), (12, 1)),
        (SimpleNamespace(platform="gpu"), None),  # a GPU described without one
        (SimpleNamespace(platform="tpu", compute_capability="9.0"), None),
        (SimpleNamespace(platform="cpu"), None),
    ],
)
def test_gpu_capability_reads_a_gpus_compute_capability_and_nothing_else(device, capability):
    assert gpu_capability(device) == capability


@pytest.mark.parametrize(
    "axes, rows, held",
    [
        (None, 64, 64),  # no step's mesh: every row
        (dict(data=8, model=1), 64, 8),
        (dict(data=2, model=4), 64, 32),  # the model axis holds the same rows
        (dict(slice=2, data=4, model=1), 64, 8),
        (dict(data=8, model=1), 60, 60),  # not split evenly: whole on every device
    ],
)
def test_device_rows_are_the_rows_a_device_holds_under_the_steps_mesh(axes, rows, held):
    if axes is None:
        assert device_rows(rows) == held
        return
    with jax.sharding.use_abstract_mesh(mesh(**axes)):
        assert device_rows(rows) == held
