import jax
import numpy as np
import pytest

from seqjax.training import optim
from seqjax.training.experiment import build_experiment
from seqjax.training.layout import batch_sharding, make_mesh
from seqjax.training.state import Checkpointer, init_state, restore_state
from seqjax.training.steps import make_train_step

from helpers import tiny_config


def make_runner(exp, mesh):
    """(initial state, run(state, start, steps) -> (state, [(loss, grad_norm)])) with one compiled step."""
    cfg = exp.cfg
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    batches = exp.train_batches()
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, batches.batch(0), mesh)
    step = make_train_step(exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state,
                           accum_steps=cfg.optim.accum_steps)

    def run(state, start, steps):
        records = []
        for i in range(start, start + steps):
            state, metrics = step(state, jax.device_put(batches.batch(i), batch_sharding(mesh)))
            records.append((float(metrics["loss"]), float(metrics["grad_norm"])))
        return state, records

    return state, run


def run_steps(exp, mesh, steps):
    state, run = make_runner(exp, mesh)
    return run(state, 0, steps)


# Adam turns near-zero gradients into steps of up to the learning rate, so float noise from a
# different reduction order can move a parameter by a fraction of it: compare at that scale.
LR = 1e-3


def assert_trees_close(a, b, **tol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), **tol)


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_eight_devices_give_the_same_loss_and_params_as_one(kind):
    exp = build_experiment(tiny_config(f"model.kind={kind}", "model.dropout=0.0", f"optim.learning_rate={LR}"))
    one, losses_one = run_steps(exp, make_mesh("data:1", jax.devices()[:1]), 3)
    eight, losses_eight = run_steps(exp, make_mesh("data:8", jax.devices()[:8]), 3)
    np.testing.assert_allclose(losses_one, losses_eight, rtol=1e-5)
    assert_trees_close(one.params, eight.params, rtol=1e-4, atol=LR / 2)


def test_gradient_accumulation_equals_one_big_batch():
    mesh = make_mesh("data:1", jax.devices()[:1])
    settings = ("model.dropout=0.0", f"optim.learning_rate={LR}")
    whole, losses_whole = run_steps(build_experiment(tiny_config(*settings)), mesh, 2)
    accumulated, losses_acc = run_steps(build_experiment(tiny_config(*settings, "optim.accum_steps=4")), mesh, 2)
    np.testing.assert_allclose(losses_whole, losses_acc, rtol=1e-5)
    assert_trees_close(whole.params, accumulated.params, rtol=1e-4, atol=LR / 2)


def test_checkpoint_and_resume_continue_exactly_like_an_uninterrupted_run(tmp_path):
    exp = build_experiment(tiny_config("model.dropout=0.2", "train.steps=6"))
    mesh = make_mesh("data:2", jax.devices()[:2])
    initial, run = make_runner(exp, mesh)
    straight, straight_losses = run(initial, 0, 6)

    initial, _ = make_runner(exp, mesh)  # the first state was donated to the step
    first, first_losses = run(initial, 0, 3)
    checkpointer = Checkpointer.of_run(str(tmp_path), keep=2)
    checkpointer.save(first, {"data_position": 3})
    checkpointer.close()
    checkpointer = Checkpointer.of_run(str(tmp_path), keep=2)
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    restored, meta = restore_state(exp, checkpointer, 3, optimizer, mesh, exp.train_batches().batch(0))
    checkpointer.close()
    assert meta["data_position"] == 3 and int(restored.step) == 3
    resumed, resumed_losses = run(restored, 3, 3)

    assert first_losses + resumed_losses == straight_losses
    for x, y in zip(jax.tree.leaves(straight), jax.tree.leaves(resumed)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
