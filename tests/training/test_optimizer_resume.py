"""Every optim.kind trains the tiny default experiment, and its state (Adafactor's factored
moments, Muon's partitioned ones, ...) goes through a checkpoint so that a run resumed halfway
ends bit-identical to an uninterrupted one. (AdamW's resume through the whole loop is
tests/training/test_loop.py's.)"""

import jax
import numpy as np
import pytest
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.config import OPTIMIZERS
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import make_mesh
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import init_state, restore_state
from seqjax.training.core.steps import build_train_step

STEPS = 4
KINDS = [kind for kind in OPTIMIZERS if kind != "adamw"]


def run(kind, tmp_path):
    """(losses of STEPS steps uninterrupted, its final state, the final state of the same run
    checkpointed at STEPS // 2 and resumed from the checkpoint), all on the host."""
    cfg = tiny_config(f"optim.kind={kind}", f"train.steps={STEPS}")
    mesh = make_mesh(cfg.train.mesh, jax.devices()[:1])
    exp = build_experiment(cfg, mesh)
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    batches = exp.train_batches()
    example = batches.batch(0)
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, example, mesh)
    step = build_train_step(exp, optimizer, optim.learning_rate_schedule(cfg.optim, cfg.train.steps), mesh, state)
    losses = []
    for i in range(STEPS):
        state, metrics = step(state, batches.batch(i))
        losses.append(float(metrics["loss"]))
        if i + 1 == STEPS // 2:
            checkpointer = RunDir(str(tmp_path)).checkpointer(1)
            checkpointer.save(state, {"data_position": i + 1})
            checkpointer.close()
    checkpointer = RunDir(str(tmp_path)).checkpointer(1)
    resumed, _ = restore_state(exp, checkpointer, STEPS // 2, optimizer, mesh, example)
    checkpointer.close()
    for i in range(STEPS // 2, STEPS):
        resumed, _ = step(resumed, batches.batch(i))
    return losses, jax.device_get(state), jax.device_get(resumed)


@pytest.fixture(scope="module", params=KINDS)
def kind_run(request, tmp_path_factory):
    return request.param, run(request.param, tmp_path_factory.mktemp(request.param))


@pytest.mark.slow
def test_each_optimizer_lowers_the_training_loss(kind_run):
    kind, (losses, _, _) = kind_run
    assert losses[-1] < losses[0] - 0.05, (kind, losses)


@pytest.mark.slow
def test_each_optimizer_resumed_from_a_checkpoint_ends_bit_identical_to_an_uninterrupted_run(kind_run):
    kind, (_, straight, resumed) = kind_run
    assert jax.tree.structure(resumed) == jax.tree.structure(straight)
    for (path, got), want in zip(jax.tree_util.tree_leaves_with_path(resumed), jax.tree.leaves(straight)):
        np.testing.assert_array_equal(got, want, err_msg=f"{kind}: {jax.tree_util.keystr(path)}")
