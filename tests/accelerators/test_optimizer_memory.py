"""The optimizer state's bytes per device in `seqjax compile`'s report (`per_device_bytes` of the
abstract state the train step is compiled for) are the optimizer's: Adafactor keeps a matrix's
second moment as its row and column means, R + C numbers where AdamW keeps two of R x C."""

import jax
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.accelerators.abstract_run import abstract_batch, build
from seqjax.training.core.layout import make_mesh, path_name
from seqjax.training.core.memory import per_device_bytes
from seqjax.training.core.state import abstract_state

VOCAB, WIDTH = 1000, 128  # the embedding [V, D], factored: both dimensions reach Adafactor's default 128


def optimizer_state(kind):
    """The abstract optimizer state `seqjax compile` reports for the tiny LM under `kind`."""
    cfg = tiny_config(f"optim.kind={kind}", f"model.d_model={WIDTH}")
    mesh = make_mesh(cfg.train.mesh, jax.devices()[:1])
    parts, batch = build(cfg, mesh, VOCAB), abstract_batch(cfg, mesh)
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    return abstract_state(parts.model, parts.head, optimizer, batch, mesh, cfg.train.sharding).opt_state


def embedding_state_bytes(state):
    leaves = jax.tree_util.tree_leaves_with_path(state)
    return per_device_bytes([leaf for path, leaf in leaves if path_name(path).endswith("embed/embedding")])


def test_adafactor_keeps_a_matrix_in_its_row_and_column_means_where_adamw_keeps_two_copies():
    adamw, adafactor = optimizer_state("adamw"), optimizer_state("adafactor")
    assert embedding_state_bytes(adamw) == 2 * VOCAB * WIDTH * 4  # first and second moments, float32
    assert embedding_state_bytes(adafactor) == (VOCAB + WIDTH + 1) * 4  # rows, columns, an unused [1] slot
    assert per_device_bytes(adafactor) < per_device_bytes(adamw) / 4
