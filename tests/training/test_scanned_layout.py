"""A scanned layer stack is placed as its layers are: the stack's leading (layer) axis is never
split, and every other axis gets the logical name the unscanned layer's parameter has."""

import jax
import jax.numpy as jnp
import pytest

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.models import build_model
from seqjax.training.core.layout import logical_axes, path_name


def parameter_axes(*overrides):
    cfg = config_lib.override(Config(), ["model.layers=2", "model.kv_heads=2", *overrides])
    model = build_model(cfg.model, 100)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((2, 8), jnp.int32)))["params"]
    return {
        path_name(p): logical_axes(path_name(p), leaf.ndim) for p, leaf in jax.tree_util.tree_leaves_with_path(shapes)
    }


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_scanned_parameters_are_named_as_the_layers_own_behind_an_unsplit_layer_axis(mlp):
    scanned = parameter_axes("model.scan_layers=true", f"model.mlp={mlp}")
    unscanned = parameter_axes("model.scan_layers=false", f"model.mlp={mlp}")
    stacked = {name: axes for name, axes in scanned.items() if name.startswith("blocks/")}
    assert stacked
    for name, axes in stacked.items():
        layer = unscanned[name.replace("blocks/", "blocks_0/", 1)]
        assert axes == (None, *layer), name
        assert "other" not in axes, name


def test_swiglu_gate_is_split_over_the_mlp_units_as_its_up_projection():
    axes = parameter_axes("model.mlp=swiglu")
    assert axes["blocks_0/ff_gate/kernel"] == axes["blocks_0/ff_in/kernel"] == ("embed", "mlp")
    assert axes["blocks_0/ff_gate/bias"] == ("mlp",)
