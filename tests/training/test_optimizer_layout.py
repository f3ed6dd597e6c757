"""Optimizer states of other shapes than their parameters (Adafactor's row and column means and
the placeholders of the parameters it does not factor) are placed by every strategy, and a
factored run trains under FSDP and tensor parallelism as on one device."""

import jax
import pytest
from helpers import EXACT_UPDATES, assert_trains_alike
from jax.sharding import PartitionSpec as P
from layout_runs import mesh_of, one_device_run, train_steps
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import path_name
from seqjax.training.core.state import abstract_state

LR = 1e-3
STEPS = 3
# Factored from 2 rows up, so that the tiny model's matrices are factored as a real model's are.
FACTORED = ("optim.kind=adafactor", "optim.adafactor.min_dim_size_to_factor=2")
SETTINGS = (*FACTORED, *EXACT_UPDATES, f"optim.learning_rate={LR}", "train.batch_size=16", f"train.steps={STEPS}")


@pytest.mark.parametrize("strategy", ["fsdp", "tensor", "fsdp_tensor"])
@pytest.mark.parametrize("scan_layers", [False, True])
def test_factored_optimizer_state_is_placed_and_moments_of_the_parameters_shape_follow_it(strategy, scan_layers):
    mesh = mesh_of("data:8" if strategy == "fsdp" else "data:4,model:2")
    cfg = tiny_config(*FACTORED, f"train.sharding={strategy}", f"model.scan_layers={str(scan_layers).lower()}")
    exp = build_experiment(cfg, mesh)
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    state = abstract_state(exp.model, exp.head, optimizer, exp.train_batches().batch(0), mesh, strategy)
    params = {path_name(p): leaf for p, leaf in jax.tree_util.tree_leaves_with_path(state.params)}
    factored = 0
    for path, leaf in jax.tree_util.tree_leaves_with_path(state.opt_state):
        name = path_name(path)
        parameter = next((params[name[i:]] for i in range(len(name)) if name[i:] in params), None)
        if parameter is None or leaf.shape != parameter.shape:
            factored += leaf.shape != ()
            continue
        assert leaf.sharding.spec == parameter.sharding.spec, name
    assert factored > 0
    assert any(leaf.sharding.spec != P() for leaf in jax.tree.leaves(state.params))


@pytest.fixture(scope="module")
def one_device():
    """(initial state on the host, (params, records) of STEPS updates on one device)."""
    return one_device_run(SETTINGS)


@pytest.mark.slow
@pytest.mark.parametrize("mesh_spec, strategy", [("data:8", "fsdp"), ("data:4,model:2", "tensor")])
def test_a_factored_optimizer_trains_under_fsdp_and_tensor_parallelism_like_one_device(one_device, mesh_spec, strategy):
    initial, reference = one_device
    got = train_steps(SETTINGS, initial, mesh_spec, f"train.sharding={strategy}")
    assert_trains_alike(got, reference, learning_rate=LR, steps=STEPS)
