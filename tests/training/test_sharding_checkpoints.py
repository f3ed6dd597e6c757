"""A checkpoint written on one mesh and strategy restores bit-identically onto another."""

import jax
import numpy as np
import pytest
from layout_runs import mesh_of
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import abstract_state, init_state, placement, restore_state


@pytest.fixture(scope="module")
def experiment_and_state():
    """A tiny experiment and its initial state on the host (Adam moments made non-zero)."""
    exp = build_experiment(tiny_config())
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    batch = exp.train_batches().batch(0)
    state = jax.device_get(init_state(exp.model, exp.head, optimizer, 0, batch, mesh_of("data:1")))
    moments = jax.tree.map(lambda x: x + 0.5 if x.dtype == np.float32 else x, state.opt_state)
    return exp, state.replace(opt_state=moments)


@pytest.mark.parametrize(
    "source, target",
    [
        (("data:8", "data"), ("data:1", "data")),
        (("data:1", "data"), ("data:8", "fsdp")),
        (("data:8", "fsdp"), ("data:4,model:2", "fsdp_tensor")),
    ],
    ids=["8_devices_to_1", "1_device_to_8_fsdp", "fsdp_to_fsdp_tensor"],
)
def test_checkpoint_restores_onto_another_mesh_and_strategy_bit_identically(
    experiment_and_state, tmp_path, source, target
):
    exp, state = experiment_and_state
    (source_mesh, source_strategy), (target_mesh, target_strategy) = source, target
    mesh = mesh_of(source_mesh)
    example = exp.train_batches().batch(0)
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    written = jax.device_put(
        state, placement(abstract_state(exp.model, exp.head, optimizer, example, mesh, source_strategy))
    )
    checkpointer = RunDir(str(tmp_path)).checkpointer(1)
    checkpointer.save(written, {"data_position": 0})
    checkpointer.close()

    mesh = mesh_of(target_mesh)
    checkpointer = RunDir(str(tmp_path)).checkpointer(1)
    restored, _ = restore_state(exp, checkpointer, 0, optimizer, mesh, example, target_strategy)
    checkpointer.close()

    expected = placement(abstract_state(exp.model, exp.head, optimizer, example, mesh, target_strategy))
    for got, sharding in zip(jax.tree.leaves(restored), jax.tree.leaves(expected)):
        assert got.sharding.is_equivalent_to(sharding, got.ndim)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(state)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
