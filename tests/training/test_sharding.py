"""Sharding strategies: where each parameter goes, what a device holds, and that every
strategy (and the shard_map step) trains exactly like one device."""

import jax
import numpy as np
import pytest
from helpers import EXACT_UPDATES, assert_trains_alike, tiny_config
from jax.sharding import PartitionSpec as P
from layout_runs import mesh_of, one_device_run, train_steps

from seqjax import optimizers as optim
from seqjax.heads.full_head import VocabParallelSoftmax
from seqjax.model_head import init_params
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import partition_spec, tree_shardings, validate_strategy
from seqjax.training.core.memory import per_device_bytes

F32 = np.dtype(np.float32)


def spec(name, shape, strategy, mesh):
    return partition_spec(name, shape, F32, strategy, mesh)


def test_fsdp_splits_each_parameter_on_its_first_dimension_that_divides():
    mesh = mesh_of("data:8")
    assert spec("params/model/blocks_0/ff_in/kernel", (32, 64), "fsdp", mesh) == P("data")
    assert spec("params/model/embed/embedding", (36, 32), "fsdp", mesh) == P(None, "data")
    assert spec("params/model/blocks_0/self_attention/qkv/bias", (3, 2, 16), "fsdp", mesh) == P(None, None, "data")
    assert spec("params/head/biases", (36,), "fsdp", mesh) == P()  # 36 rows do not split 8 ways


def test_tensor_parallel_splits_heads_mlp_and_vocabulary_over_model():
    mesh = mesh_of("data:4,model:2")
    block = "params/model/blocks_0/"
    assert spec(block + "self_attention/qkv/kernel", (32, 3, 2, 16), "tensor", mesh) == P(None, None, "model")
    assert spec(block + "self_attention/out/kernel", (2, 16, 32), "tensor", mesh) == P("model")
    assert spec(block + "ff_in/kernel", (32, 64), "tensor", mesh) == P(None, "model")
    assert spec(block + "ff_out/kernel", (64, 32), "tensor", mesh) == P("model")
    assert spec("params/head/weights", (36, 32), "tensor", mesh) == P("model")
    assert spec(block + "ff_norm/scale", (32,), "tensor", mesh) == P()


def test_fsdp_tensor_splits_over_model_first_then_over_data():
    mesh = mesh_of("data:4,model:2")
    assert spec("params/model/blocks_0/ff_in/kernel", (32, 64), "fsdp_tensor", mesh) == P("data", "model")
    assert spec("params/model/embed/embedding", (36, 32), "fsdp_tensor", mesh) == P("model", "data")


def test_optimizer_state_follows_its_parameter_and_integers_stay_replicated():
    mesh = mesh_of("data:8")
    moment = "opt_state/1/0/mu/model/blocks_0/ff_in/kernel"
    assert spec(moment, (32, 64), "fsdp", mesh) == spec("params/model/blocks_0/ff_in/kernel", (32, 64), "fsdp", mesh)
    assert partition_spec("opt_state/1/0/count", (), np.dtype(np.int32), "fsdp", mesh) == P()
    assert partition_spec("key", (2,), np.dtype(np.uint32), "fsdp", mesh) == P()


def test_tensor_parallel_refuses_heads_that_do_not_split_evenly():
    with pytest.raises(ValueError, match="splits heads over the model axis.*has 2 along it.*model:4"):
        spec("params/model/blocks_0/self_attention/qkv/kernel", (32, 3, 2, 16), "tensor", mesh_of("data:2,model:4"))


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
    shapes = jax.eval_shape(
        lambda: init_params(exp.model, exp.head, jax.random.PRNGKey(0), exp.train_batches().batch(0))
    )
    mesh = mesh_of("data:8")

    def held(strategy):
        placed = jax.tree.map(
            lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
            shapes,
            tree_shardings(shapes, mesh, strategy),
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
