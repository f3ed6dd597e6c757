"""Optimizer states of other shapes than their parameters (Adafactor's row and column means and
the placeholders of the parameters it does not factor) are placed by every strategy, and a
factored run trains under FSDP and tensor parallelism as on one device."""

import jax
import numpy as np
import pytest
from helpers import EXACT_UPDATES, assert_trains_alike, tiny_config
from jax.sharding import PartitionSpec as P

from seqjax import optimizers as optim
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import batch_sharding, make_mesh, path_name
from seqjax.training.core.state import abstract_state, init_state, state_shardings
from seqjax.training.core.steps import build_train_step

LR = 1e-3
STEPS = 3
# Factored from 2 rows up, so that the tiny model's matrices are factored as a real model's are.
FACTORED = ("optim.kind=adafactor", "optim.adafactor.min_dim_size_to_factor=2")
SETTINGS = (*FACTORED, *EXACT_UPDATES, f"optim.learning_rate={LR}", "train.batch_size=16", f"train.steps={STEPS}")


def mesh_of(spec):
    sizes = [int(part.split(":")[1]) for part in spec.split(",")]
    return make_mesh(spec, jax.devices()[: int(np.prod(sizes))])


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


def train_steps(initial, mesh_spec, *overrides):
    """(params, [(loss, grad_norm) of each step]) after STEPS updates from the host state `initial`."""
    mesh = mesh_of(mesh_spec)
    exp = build_experiment(tiny_config(*SETTINGS, *overrides), mesh)
    cfg = exp.cfg
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    batches = exp.train_batches()
    state = jax.device_put(initial, state_shardings(initial, mesh, cfg.train.sharding))
    step = build_train_step(exp, optimizer, schedule, mesh, state)
    records = []
    for i in range(STEPS):
        state, metrics = step(state, jax.device_put(batches.batch(i), batch_sharding(mesh)))
        records.append((float(metrics["loss"]), float(metrics["grad_norm"])))
    return jax.device_get(state.params), records


@pytest.fixture(scope="module")
def one_device():
    exp = build_experiment(tiny_config(*SETTINGS))
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    batch = exp.train_batches().batch(0)
    initial = jax.device_get(init_state(exp.model, exp.head, optimizer, 0, batch, mesh_of("data:1")))
    return initial, train_steps(initial, "data:1")


@pytest.mark.slow
@pytest.mark.parametrize("mesh_spec, strategy", [("data:8", "fsdp"), ("data:4,model:2", "tensor")])
def test_a_factored_optimizer_trains_under_fsdp_and_tensor_parallelism_like_one_device(one_device, mesh_spec, strategy):
    initial, reference = one_device
    got = train_steps(initial, mesh_spec, f"train.sharding={strategy}")
    assert_trains_alike(got, reference, learning_rate=LR, steps=STEPS)
