"""Tiny runs trained under a device layout, for the tests that check a layout trains as one
device does: the mesh a spec names, STEPS updates from one host state, the one-device reference."""

import jax
import numpy as np
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import batch_sharding, make_mesh
from seqjax.training.core.state import abstract_state, init_state, placement
from seqjax.training.core.steps import build_train_step


def mesh_of(spec):
    """The mesh of `spec` ("data:4,model:2") over the first devices it needs."""
    sizes = [int(part.split(":")[1]) for part in spec.split(",")]
    return make_mesh(spec, jax.devices()[: int(np.prod(sizes))])


def train_steps(settings, initial, mesh_spec, *overrides):
    """(params, [(loss, grad_norm) of each step]) after the train.steps updates of the tiny run
    of `settings` from the host state `initial`, under the layout the overrides describe."""
    mesh = mesh_of(mesh_spec)
    exp = build_experiment(tiny_config(*settings, *overrides), mesh)
    cfg = exp.cfg
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    batches = exp.train_batches()
    shardings = placement(abstract_state(exp.model, exp.head, optimizer, batches.batch(0), mesh, cfg.train.sharding))
    state = jax.device_put(initial, shardings)
    step = build_train_step(exp, optimizer, schedule, mesh, state)
    records = []
    for i in range(cfg.train.steps):
        state, metrics = step(state, jax.device_put(batches.batch(i), batch_sharding(mesh)))
        records.append((float(metrics["loss"]), float(metrics["grad_norm"])))
    return jax.device_get(state.params), records


def one_device_run(settings):
    """(initial state on the host, (params, records) of its updates on one device) of the tiny
    run of `settings`."""
    exp = build_experiment(tiny_config(*settings))
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    batch = exp.train_batches().batch(0)
    initial = jax.device_get(init_state(exp.model, exp.head, optimizer, 0, batch, mesh_of("data:1")))
    return initial, train_steps(settings, initial, "data:1")
