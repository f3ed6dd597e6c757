"""The data-parallel train step written with explicit collectives (`shard_map`).

What `pmap` data parallelism was, in today's JAX: each device of the `data` axis holds a
replica of the state and its B / M rows of the batch, computes its token-weighted part of
the loss and gradients, and one `psum` all-reduces them; every replica then applies the
same optimizer update. It computes the update of `steps.make_train_step` (same loss,
same parameters up to float summation order); dropout and sampled heads draw per device
(the key folds in the device's index), so with those the random draws differ from the
jit step's, not their distribution.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

from seqjax.contracts import Batch
from seqjax.training.mesh import batch_sharding, replicated
from seqjax.training.state import TrainState, state_shardings
from seqjax.contracts import Objective
from seqjax.training.steps import TrainStep, apply_update, weighted_loss_and_grads


def check_shard_map_mesh(mesh: Mesh) -> None:
    if mesh.shape["model"] != 1:
        raise ValueError(
            f"train.step_kind=shard_map is data parallel: train.mesh must have model:1, got {dict(mesh.shape)}"
        )


def make_shard_map_train_step(
    model: nn.Module,
    head: nn.Module,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    mesh: Mesh,
    state_shape: TrainState,
    *,
    accum_steps: int = 1,
) -> TrainStep:
    """One optimizer update with a replicated state and an explicit gradient all-reduce.

    Same contract as `steps.make_train_step` with `strategy="data"`; `accum_steps`
    microbatches are taken from each device's own rows.
    """
    check_shard_map_mesh(mesh)

    def device_step(state: TrainState, batch: Batch):
        key = jax.random.fold_in(jax.random.fold_in(state.key, state.step), lax.axis_index("data"))
        tokens = lax.psum(batch["mask"].sum(), "data")
        part = weighted_loss_and_grads(
            model, head, objective, state.params, batch, key, state.step,
            accum_steps=accum_steps, total_tokens=jnp.maximum(tokens, 1.0),
        )
        loss, metrics, grads = lax.psum(part, "data")
        return apply_update(optimizer, schedule, state, loss, dict(metrics, tokens=tokens), grads)

    # Without replication typing (check_vma=False) the gradient taken inside `device_step` is
    # the device's own, so its psum is the one all-reduce; it also lets model and head code
    # written for global arrays (scans with freshly built carries) run unchanged per device.
    step = jax.shard_map(
        device_step, mesh=mesh, in_specs=(P(), P("data")), out_specs=(P(), P()), check_vma=False
    )
    shardings = state_shardings(state_shape, mesh, "data")
    return jax.jit(
        step,
        in_shardings=(shardings, batch_sharding(mesh)),
        out_shardings=(shardings, replicated(mesh)),
        donate_argnums=0,
    )
