"""Every parameter names its logical axes where it is created: every model and head kind's, and a
scanned layer stack's, whose leading axis is its layers and the rest named as the layer's own."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax import config as config_lib
from seqjax.config import HEADS, MODELS, Config
from seqjax.heads import build_head
from seqjax.models import build_model
from seqjax.training.core.layout import make_mesh, path_name, tree_shardings

V, D = 40, 16


def boxed_model_params(*overrides):
    cfg = config_lib.override(Config(), ["model.layers=2", f"model.d_model={D}", *overrides])
    model = build_model(cfg.model, V)
    tokens = jnp.zeros((2, 8), jnp.int32)
    source = {"src": tokens, "src_mask": jnp.ones((2, 8), bool)} if model.has_encoder else {}
    return jax.eval_shape(lambda: model.init(jax.random.key(0), tokens, **source))["params"]


def logical_axes(boxed):
    leaves = jax.tree_util.tree_leaves_with_path(boxed, is_leaf=lambda x: isinstance(x, nn.LogicallyPartitioned))
    return {path_name(p): box.names for p, box in leaves}


def placeable(boxed):
    """Places every leaf under FSDP: a float leaf without logical axes, or with axes that do not
    fit it, raises ValueError naming its path."""
    return tree_shardings({"params": boxed}, make_mesh("data:8", jax.devices()[:8]), "fsdp")


@pytest.mark.parametrize("kind", [kind for kind in MODELS if kind != "ngram"])  # ngram: counts, no parameters
def test_every_parameter_of_every_model_kind_names_its_logical_axes(kind):
    assert jax.tree.leaves(placeable(boxed_model_params(f"model.kind={kind}")))


@pytest.mark.parametrize("kind", list(HEADS))
def test_every_parameter_of_every_head_kind_names_its_logical_axes(kind):
    overrides = (
        [f"head.kind={kind}", "head.num_samples=8"] if kind in HEADS.family("sampling") else [f"head.kind={kind}"]
    )
    if kind == "adaptive":
        overrides.append("head.adaptive.cutoffs=10,25")
    cfg = config_lib.override(Config(), overrides)
    head = build_head(cfg.head, V, np.arange(V, 0, -1))
    hidden, targets = jnp.zeros((6, D)), jnp.zeros(6, jnp.int32)
    key = jax.random.key(0)
    boxed = jax.eval_shape(lambda: head.init({"params": key}, hidden, targets, key, None, None, method="loss"))
    assert jax.tree.leaves(placeable(boxed["params"]))


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_scanned_parameters_are_named_as_the_layers_own_behind_a_layers_axis(mlp):
    scanned = logical_axes(boxed_model_params("model.scan_layers=true", "model.kv_heads=2", f"model.mlp={mlp}"))
    unscanned = logical_axes(boxed_model_params("model.scan_layers=false", "model.kv_heads=2", f"model.mlp={mlp}"))
    stacked = {name: axes for name, axes in scanned.items() if name.startswith("blocks/")}
    assert stacked
    for name, axes in stacked.items():
        assert axes == ("layers", *unscanned[name.replace("blocks/", "blocks_0/", 1)]), name


def test_swiglu_gate_is_split_over_the_mlp_units_as_its_up_projection():
    axes = logical_axes(boxed_model_params("model.mlp=swiglu"))
    assert axes["blocks_0/ff_gate/kernel"] == axes["blocks_0/ff_in/kernel"] == ("embed", "mlp")
    assert axes["blocks_0/ff_gate/bias"] == ("mlp",)


@pytest.mark.parametrize("kv_heads", [None, 2])
def test_imported_families_options_name_their_logical_axes(kv_heads):
    """Qwen2's q/k/v biases and Qwen3's per-head q/k norms, fused (as many key/value heads as
    queries) or not."""
    heads = [f"model.kv_heads={kv_heads}"] if kv_heads else []
    boxed = boxed_model_params("model.num_heads=4", "model.qkv_bias=true", "model.qk_norm=true", *heads)
    assert jax.tree.leaves(placeable(boxed))
    axes = logical_axes(boxed)
    assert axes["blocks_0/self_attention/query_norm/scale"] == ("head_dim",)
    bias = "qkv/bias" if kv_heads is None else "query/bias"
    assert axes[f"blocks_0/self_attention/{bias}"][-2:] == ("heads", "head_dim")
