"""The jitted train and eval steps over a mesh."""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from seqjax.objectives.model_io import Batch, hidden_states, token_nll
from seqjax.training.mesh import batch_sharding, replicated
from seqjax.training.state import TrainState, state_shardings

Objective = Callable[..., tuple[jax.Array, dict[str, jax.Array]]]


def _microbatches(batch: Batch, accum_steps: int) -> Batch:
    """[B, ...] -> [A, B / A, ...], microbatch a taking rows a, a + A, ... so that each one
    draws rows from every data shard rather than from a few devices."""

    def split(x):
        x = x.reshape(x.shape[0] // accum_steps, accum_steps, *x.shape[1:])
        return jnp.swapaxes(x, 0, 1)

    return jax.tree.map(split, batch)


def make_train_step(
    model: nn.Module,
    head: nn.Module,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    mesh: Mesh,
    state_shape: TrainState,
    *,
    accum_steps: int = 1,
) -> Callable[[TrainState, Batch], tuple[TrainState, dict[str, jax.Array]]]:
    """One optimizer update: gradients of the objective over `accum_steps` microbatches.

    Microbatch gradients are weighted by their share of the batch's target tokens, so the
    update equals the one from the whole batch at once.
    """

    def loss_and_grads(params, batch, key, step):
        def loss_fn(p):
            return objective(model, head, p, batch, key, step)

        return jax.value_and_grad(loss_fn, has_aux=True)(params)

    def train_step(state: TrainState, batch: Batch):
        key = jax.random.fold_in(state.key, state.step)
        if accum_steps == 1:
            (loss, metrics), grads = loss_and_grads(state.params, batch, key, state.step)
        else:
            total = jnp.maximum(batch["mask"].sum(), 1.0)

            def accumulate(carry, micro):
                index, micro_batch = micro
                (loss, metrics), grads = loss_and_grads(
                    state.params, micro_batch, jax.random.fold_in(key, index), state.step
                )
                share = micro_batch["mask"].sum() / total
                carry = jax.tree.map(lambda acc, x: acc + share * x, carry, (loss, metrics, grads))
                return carry, None

            micro = (jnp.arange(accum_steps), _microbatches(batch, accum_steps))
            zero_loss, zero_metrics = jax.eval_shape(
                lambda: objective(model, head, state.params, jax.tree.map(lambda x: x[0], micro[1]), key, state.step)
            )
            zeros = jax.tree.map(
                lambda s: jnp.zeros(s.shape, s.dtype), (zero_loss, zero_metrics, state.params)
            )
            (loss, metrics, grads), _ = jax.lax.scan(accumulate, zeros, micro)
            metrics = dict(metrics, tokens=batch["mask"].sum())
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = dict(metrics, loss=loss, grad_norm=optax.tree.norm(grads), learning_rate=schedule(state.step))
        return TrainState(state.step + 1, params, opt_state, state.key), metrics

    shardings = state_shardings(state_shape, mesh)
    return jax.jit(
        train_step,
        in_shardings=(shardings, batch_sharding(mesh)),
        out_shardings=(shardings, replicated(mesh)),
        donate_argnums=0,
    )


def make_eval_step(model: nn.Module, head: nn.Module, mesh: Mesh) -> Callable[..., tuple[jax.Array, jax.Array]]:
    """Exact evaluation: (sum of target NLL over unmasked tokens, token count), both [] float32."""

    def eval_step(params, batch: Batch):
        hidden = hidden_states(model, params, batch, jax.random.key(0), train=False)
        nll = token_nll(head, params, hidden, batch["targets"])
        return (nll * batch["mask"]).sum(), batch["mask"].sum()

    return jax.jit(eval_step, in_shardings=(replicated(mesh), batch_sharding(mesh)), out_shardings=replicated(mesh))
