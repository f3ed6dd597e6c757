"""Sharding strategies: where each parameter goes, what a device holds, and that every
strategy (and the shard_map step) trains exactly like one device."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import EXACT_UPDATES, assert_trains_alike
from jax.sharding import PartitionSpec as P
from layout_runs import mesh_of, one_device_run, train_steps
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.heads.full_head import FullSoftmax, VocabParallelSoftmax
from seqjax.model_head import init_boxed_params
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import (
    partition_spec,
    path_name,
    tree_shardings,
    validate_strategy,
)
from seqjax.training.core.memory import per_device_bytes
from seqjax.training.core.state import abstract_state

QKV = ("embed", None, "heads", "head_dim")  # [D, 3, H, Dh]


def test_fsdp_splits_each_parameter_on_its_first_dimension_that_divides():
    mesh = mesh_of("data:8")
    assert partition_spec(("embed", "mlp"), (32, 64), "fsdp", mesh) == P("data")
    assert partition_spec(("vocab", "embed"), (36, 32), "fsdp", mesh) == P(None, "data")
    assert partition_spec((None, "heads", "head_dim"), (3, 2, 16), "fsdp", mesh) == P(None, None, "data")
    assert partition_spec(("vocab",), (36,), "fsdp", mesh) == P()  # 36 rows do not split 8 ways


def test_tensor_parallel_splits_heads_mlp_and_vocabulary_over_model():
    mesh = mesh_of("data:4,model:2")
    assert partition_spec(QKV, (32, 3, 2, 16), "tensor", mesh) == P(None, None, "model")
    assert partition_spec(("heads", "head_dim", "embed"), (2, 16, 32), "tensor", mesh) == P("model")
    assert partition_spec(("embed", "mlp"), (32, 64), "tensor", mesh) == P(None, "model")
    assert partition_spec(("mlp", "embed"), (64, 32), "tensor", mesh) == P("model")
    assert partition_spec(("vocab", "embed"), (36, 32), "tensor", mesh) == P("model")
    assert partition_spec(("embed",), (32,), "tensor", mesh) == P()


def test_fsdp_tensor_splits_over_model_first_then_over_data():
    mesh = mesh_of("data:4,model:2")
    assert partition_spec(("embed", "mlp"), (32, 64), "fsdp_tensor", mesh) == P("data", "model")
    assert partition_spec(("vocab", "embed"), (36, 32), "fsdp_tensor", mesh) == P("model", "data")


def test_a_scanned_stacks_layer_axis_is_never_split():
    mesh = mesh_of("data:4,model:2")
    assert partition_spec(("layers", "embed", "mlp"), (4, 32, 64), "fsdp_tensor", mesh) == P(None, "data", "model")


@pytest.mark.parametrize(
    "logical, shape, message",
    [
        (("embed",), (32, 64), r"names 1 logical axes \('embed',\) for its shape \(32, 64\)"),
        (("embed", "hidden"), (32, 64), r"logical axes \['hidden'\] outside vocab, embed"),
    ],
)
def test_logical_axes_that_do_not_fit_the_array_are_refused(logical, shape, message):
    with pytest.raises(ValueError, match=message):
        partition_spec(logical, shape, "fsdp", mesh_of("data:8"), "params/model/ff_in/kernel")


def test_optimizer_state_is_placed_as_its_parameter_and_integers_stay_replicated():
    exp = build_experiment(tiny_config())
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    state = abstract_state(exp.model, exp.head, optimizer, exp.train_batches().batch(0), mesh_of("data:8"), "fsdp")
    params = {path_name(p): x.sharding.spec for p, x in jax.tree_util.tree_leaves_with_path(state.params)}
    moments = 0
    for path, leaf in jax.tree_util.tree_leaves_with_path(state.opt_state):
        name = path_name(path)
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            moment = next(m for m in ("/mu/", "/nu/") if m in name)  # Adam's moments: .../mu/<parameter path>
            assert leaf.sharding.spec == params[name.split(moment, 1)[1]], name
            moments += 1
        else:
            assert leaf.sharding.spec == P(), name
    assert moments == 2 * len(params) and any(spec != P() for spec in params.values())
    assert state.step.sharding.spec == P() and state.key.sharding.spec == P()


class Unannotated(nn.Module):
    """A model whose token table is created without logical axes."""

    @nn.compact
    def __call__(self, tokens, **_):
        return self.param("table", nn.initializers.normal(), (36, 8), jnp.float32)[tokens]


def test_a_float_parameter_without_logical_axes_is_refused_naming_its_path():
    batch = {"inputs": np.zeros((8, 4), np.int32), "targets": np.zeros((8, 4), np.int32)}
    with pytest.raises(ValueError, match="params/model/table has no logical axes: create it with"):
        abstract_state(Unannotated(), FullSoftmax(vocab_size=36), optax.adam(1e-3), batch, mesh_of("data:8"), "fsdp")


def test_tensor_parallel_refuses_heads_that_do_not_split_evenly():
    with pytest.raises(ValueError, match="splits heads over the model axis: .*qkv/kernel has 2 along it.*model:4"):
        partition_spec(QKV, (32, 3, 2, 16), "tensor", mesh_of("data:2,model:4"), "params/model/qkv/kernel")


@pytest.mark.parametrize(
    "strategy, mesh_spec, message",
    [("zero3", "data:8", "must be one of"), ("fsdp", "data:4,model:2", "uses only the data axis")],
)
def test_impossible_strategies_are_clear_errors(strategy, mesh_spec, message):
    with pytest.raises(ValueError, match=message):
        validate_strategy(strategy, mesh_of(mesh_spec))


@pytest.mark.parametrize(
    "overrides, mesh_spec, message",
    [
        (["train.step_kind=shard_map"], "data:4,model:2", "model:1"),
        (
            ["train.vocab_parallel=true", "train.sharding=tensor", "head.kind=sampled", "head.num_samples=8"],
            "data:4,model:2",
            "head.kind=full",
        ),
        (["train.vocab_parallel=true"], "data:8", "tensor or fsdp_tensor"),
        (["optim.accum_steps=2"], "data:8", "data axis size 8 times optim.accum_steps=2, got 8"),
    ],
)
def test_layouts_that_cannot_run_are_refused_before_tracing(overrides, mesh_spec, message):
    with pytest.raises(ValueError, match=message):
        build_experiment(tiny_config(*overrides), mesh_of(mesh_spec))


def test_the_experiment_for_a_vocab_parallel_layout_trains_the_vocab_parallel_head():
    settings = ("train.sharding=tensor", "train.vocab_parallel=true")
    mesh = mesh_of("data:4,model:2")
    assert isinstance(build_experiment(tiny_config(*settings), mesh).head, VocabParallelSoftmax)
    assert not isinstance(build_experiment(tiny_config(*settings)).head, VocabParallelSoftmax)  # decoding: no mesh


def test_fsdp_per_device_parameter_bytes_are_an_eighth_of_data_parallel():
    exp = build_experiment(tiny_config())
    boxed = jax.eval_shape(
        lambda: init_boxed_params(exp.model, exp.head, jax.random.PRNGKey(0), exp.train_batches().batch(0))
    )
    shapes = nn.meta.unbox(boxed)
    mesh = mesh_of("data:8")

    def held(strategy):
        placed = jax.tree.map(
            lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
            shapes,
            tree_shardings(boxed, mesh, strategy),
        )
        return per_device_bytes(placed)

    data, fsdp = held("data"), held("fsdp")
    assert data == sum(x.size * 4 for x in jax.tree.leaves(shapes))
    assert data / 8 <= fsdp <= 1.03 * data / 8  # only the 36 output biases stay whole


LR = 1e-3
STEPS = 4
SETTINGS = (*EXACT_UPDATES, f"optim.learning_rate={LR}", "train.batch_size=16", f"train.steps={STEPS}")


@pytest.fixture(scope="module")
def one_device():
    """(initial state on the host, (params, records) of STEPS updates on one device)."""
    return one_device_run(SETTINGS)


def test_the_reference_run_updates_from_its_first_step(one_device):
    """Every compared step is a real update: the learning rate of step 0 is not 0 and the
    loss moves from step to step."""
    _, (_, records) = one_device
    assert float(optim.learning_rate_schedule(tiny_config(*SETTINGS).optim, STEPS)(0)) == pytest.approx(LR)
    losses = [loss for loss, _ in records]
    assert all(abs(a - b) > 1e-3 for a, b in zip(losses, losses[1:]))


@pytest.mark.parametrize(
    "mesh_spec, overrides",
    [
        ("data:8", ["train.sharding=data"]),
        ("data:8", ["train.sharding=fsdp"]),
        ("data:4,model:2", ["train.sharding=tensor"]),
        ("data:4,model:2", ["train.sharding=fsdp_tensor"]),
        ("data:8", ["train.step_kind=shard_map", "optim.accum_steps=2"]),
        ("data:4,model:2", ["train.sharding=fsdp_tensor", "train.vocab_parallel=true"]),
    ],
    ids=["data", "fsdp", "tensor", "fsdp_tensor", "shard_map_accumulated", "vocab_parallel"],
)
def test_every_strategy_trains_like_one_device(one_device, mesh_spec, overrides):
    """Losses and gradient norms of 4 updates, and the parameters after them, equal one
    device's to float32 summation noise."""
    initial, reference = one_device
    assert_trains_alike(train_steps(SETTINGS, initial, mesh_spec, *overrides), reference, learning_rate=LR, steps=STEPS)
