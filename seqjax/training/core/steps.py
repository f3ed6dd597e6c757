"""The step functions: the train step (`make_train_step`: jitted, or the same update with
explicit collectives, `shard_map`), the eval step, and `build_train_step`, which builds the
run's train step for its layout.

The batch is split over `data`; parameters and optimizer state are placed by the run's
sharding strategy (`seqjax.training.core.layout`), and the update keeps that placement. The jit
step leaves the collectives to the compiler; the shard_map step is what `pmap` data
parallelism was: each device of `data` holds a replica of the state and its B / M rows,
computes its token-weighted part of the loss and gradients, and one `psum` all-reduces
them before every replica applies the same optimizer update. Both compute the same update
(same loss, same parameters up to float summation order); in the shard_map step dropout
and sampled heads draw per device (the key folds in the device's index), so with those the
random draws differ from the jit step's, not their distribution.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from seqjax.config import Config
from seqjax.contracts import SPECIAL_IDS, Batch, Head, Model, Objective, Params
from seqjax.model_head import hidden_states, token_nll
from seqjax.objectives import eval_sums_of
from seqjax.placement import under_mesh
from seqjax.training.core.layout import (
    BATCH_AXES,
    STEP_KINDS,
    batch_sharding,
    batch_shards,
    check_shard_map_mesh,
    replicated,
)
from seqjax.training.core.state import TrainState, placement

TrainStep = Callable[[TrainState, Batch], tuple[TrainState, dict[str, jax.Array]]]
EvalStep = Callable[..., tuple[Any, ...]]


def _microbatches(batch: Batch, accum_steps: int) -> Batch:
    """[B, ...] -> [A, B / A, ...], microbatch a taking rows a, a + A, ... so that each one
    draws rows from every data shard rather than from a few devices."""

    def split(x: jax.Array) -> jax.Array:
        x = x.reshape(x.shape[0] // accum_steps, accum_steps, *x.shape[1:])
        return jnp.swapaxes(x, 0, 1)

    result: Batch = jax.tree.map(split, batch)
    return result


def weighted_loss_and_grads(
    model: Model,
    head: Head,
    objective: Objective,
    params: Params,
    batch: Batch,
    key: jax.Array,
    step: jax.Array,
    *,
    accum_steps: int,
    total_tokens: jax.Array,
    microbatch_sharding: NamedSharding | None = None,
) -> tuple[jax.Array, dict[str, jax.Array], Params]:
    """Σ over `accum_steps` microbatches of share · (loss, metrics, grads), share = tokens / total.

    With `total_tokens` the batch's own token count this is the update of the whole batch
    at once; with a count summed over devices it is one device's part of the global update.
    Microbatch a draws dropout from fold_in(key, a); a single microbatch uses `key` itself.
    Only one microbatch's activations are alive at a time (`lax.scan`).
    """

    def part(micro_batch: Batch, micro_key: jax.Array) -> tuple[jax.Array, dict[str, jax.Array], Params]:
        def loss_fn(p: Params) -> tuple[jax.Array, dict[str, jax.Array]]:
            return objective(model, head, p, micro_batch, micro_key, step, ids=SPECIAL_IDS)

        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        share = micro_batch["mask"].sum() / total_tokens
        result: tuple[jax.Array, dict[str, jax.Array], Params] = jax.tree.map(
            lambda x: share * x, (loss, metrics, grads)
        )
        return result

    if accum_steps == 1:
        return part(batch, key)
    micro = _microbatches(batch, accum_steps)
    if microbatch_sharding is not None:
        micro = jax.lax.with_sharding_constraint(micro, microbatch_sharding)

    def accumulate(
        carry: tuple[jax.Array, dict[str, jax.Array], Params], inputs: tuple[jax.Array, Batch]
    ) -> tuple[tuple[jax.Array, dict[str, jax.Array], Params], None]:
        index, micro_batch = inputs
        return jax.tree.map(jnp.add, carry, part(micro_batch, jax.random.fold_in(key, index))), None

    first = jax.tree.map(lambda x: x[0], micro)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(part, first, key))
    totals: tuple[jax.Array, dict[str, jax.Array], Params]
    totals, _ = jax.lax.scan(accumulate, zeros, (jnp.arange(accum_steps), micro))
    return totals


def apply_update(
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    state: TrainState,
    loss: jax.Array,
    metrics: dict[str, jax.Array],
    grads: Params,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """The optimizer update and the step's metrics (loss, grad_norm, learning_rate added)."""
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = dict(metrics, loss=loss, grad_norm=optax.tree.norm(grads), learning_rate=schedule(state.step))
    return TrainState(state.step + 1, params, opt_state, state.key), metrics


def _placed(step: TrainStep, state_shape: TrainState, mesh: Mesh) -> TrainStep:
    """`step` jitted with the state kept where `state_shape` lies (its strategy's placement), the
    batch split over `data`, the metrics replicated, and the incoming state donated."""
    shardings = placement(state_shape)
    return jax.jit(
        under_mesh(step, mesh),
        in_shardings=(shardings, batch_sharding(mesh)),
        out_shardings=(shardings, replicated(mesh)),
        donate_argnums=0,
    )


def make_train_step(
    model: Model,
    head: Head,
    objective: Objective,
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    mesh: Mesh,
    state_shape: TrainState,
    *,
    accum_steps: int = 1,
    strategy: str = "data",
    step_kind: str = "jit",
) -> TrainStep:
    """One optimizer update: gradients of the objective over `accum_steps` microbatches.

    Microbatch gradients are weighted by their share of the batch's target tokens, so the
    update equals the one from the whole batch at once. The state keeps the placement that
    `state_shape` (placed by `strategy`: `init_state`, `restore_state`, `abstract_state`)
    carries; the batch is split over `data`.

    step_kind: "jit", the collectives left to the compiler, or "shard_map", the data-parallel
    step (strategy "data", a mesh of model:1) with a replicated state and an explicit gradient
    all-reduce, whose `accum_steps` microbatches are taken from each device's own rows.
    """
    if step_kind not in STEP_KINDS:
        raise ValueError(f"step_kind must be one of {', '.join(STEP_KINDS)}, got {step_kind!r}")
    per_device = step_kind == "shard_map"
    if per_device:
        check_shard_map_mesh(mesh)
        if strategy != "data":
            raise ValueError(
                f"step_kind=shard_map is the data-parallel step: it needs strategy='data', got {strategy!r}"
            )

    def train_step(state: TrainState, batch: Batch) -> tuple[TrainState, dict[str, jax.Array]]:
        # Per device (the shard_map step's body, on one device's rows) the dropout key folds in
        # the device's index and the token count and gradients are summed over `data`.
        key = jax.random.fold_in(state.key, state.step)
        tokens = batch["mask"].sum()
        microbatch_sharding = None
        if per_device:
            key = jax.random.fold_in(key, lax.axis_index(BATCH_AXES))
            tokens = lax.psum(tokens, BATCH_AXES)
        elif (batch["mask"].shape[0] // accum_steps) % batch_shards(mesh) == 0:
            # Microbatches stay on the devices that hold their rows when the rows divide evenly.
            microbatch_sharding = NamedSharding(mesh, P(None, BATCH_AXES))
        part = weighted_loss_and_grads(
            model,
            head,
            objective,
            state.params,
            batch,
            key,
            state.step,
            accum_steps=accum_steps,
            total_tokens=jnp.maximum(tokens, 1.0),
            microbatch_sharding=microbatch_sharding,
        )
        loss, metrics, grads = lax.psum(part, BATCH_AXES) if per_device else part
        return apply_update(optimizer, schedule, state, loss, dict(metrics, tokens=tokens), grads)

    if not per_device:
        return _placed(train_step, state_shape, mesh)
    # Without replication typing (check_vma=False) the gradient taken inside `train_step` is the
    # device's own, so its psum is the one all-reduce; it also lets model and head code
    # written for global arrays (scans with freshly built carries) run unchanged per device.
    step = jax.shard_map(train_step, mesh=mesh, in_specs=(P(), P(BATCH_AXES)), out_specs=(P(), P()), check_vma=False)
    return _placed(step, state_shape, mesh)


class StepParts(Protocol):
    """What a train step is built of: an `Experiment`, or the parts of one without data."""

    cfg: Config
    model: Model
    head: Head
    objective: Objective


def build_train_step(
    exp: StepParts,
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    mesh: Mesh,
    state: TrainState,
) -> TrainStep:
    """The run's train step: the jit step under train.sharding, or the explicit shard_map
    step (train.step_kind), for `exp`'s model, head (already the one for the layout) and
    objective."""
    t = exp.cfg.train
    parts = (exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state)
    return make_train_step(*parts, accum_steps=exp.cfg.optim.accum_steps, strategy=t.sharding, step_kind=t.step_kind)


@dataclasses.dataclass(frozen=True)
class CompiledStep:
    """A train step compiled ahead for batches [rows, length] = `shape` and a state of `state`'s
    shapes, dtypes and shardings (ShapeDtypeStructs or arrays): `model.remat=auto`'s chosen
    policy, compiled to measure its peak, which the run then runs rather than compiles again."""

    shape: tuple[int, int]
    state: TrainState
    program: Any

    def serves(self, state: TrainState, shape: tuple[int, int]) -> bool:
        """Whether `program` takes `state` (every leaf's shape, dtype, weak type and sharding as
        compiled) with batches of `shape`."""
        return shape == self.shape and _signature(state) == _signature(self.state)


def _signature(state: TrainState) -> tuple[Any, list[tuple[Any, ...]]]:
    leaves, tree = jax.tree.flatten(state)
    return tree, [(leaf.shape, leaf.dtype, getattr(leaf, "weak_type", False), leaf.sharding) for leaf in leaves]


def compile_train_steps(
    train_step: TrainStep,
    state: TrainState,
    shapes: list[tuple[int, int]],
    example: dict[str, Any],
    sharding: Any,
    ready: CompiledStep | None = None,
) -> tuple[dict[tuple[int, int], Any], dict[tuple[int, int], dict[str, jax.ShapeDtypeStruct]], float]:
    """`train_step` compiled for each batch shape [rows, length] the training batches can take
    (`IndexedBatches.shapes`: a sequence-to-sequence run's buckets), ahead of the first step: a loop
    that calls these programs compiles nothing, so its progress bar's rate and time left count
    steps, not compilations.

    Args:
      example: a training batch, every array [rows, length]: the keys and dtypes of the batches.
      sharding: the batch arrays' sharding.
      ready: a program compiled already (`remat.run_remat`'s), taken for its shape where it
        `serves` `state`, compiled again where it does not.

    Returns:
      (programs, abstract batches, seconds spent compiling), each by shape.
    """
    began = time.perf_counter()
    abstract = {
        shape: {k: jax.ShapeDtypeStruct(shape, v.dtype, sharding=sharding) for k, v in example.items()}
        for shape in shapes
    }
    programs = {
        shape: ready.program
        if ready is not None and ready.serves(state, shape)
        else train_step.lower(state, batch).compile()  # type: ignore[attr-defined]
        for shape, batch in abstract.items()
    }
    return programs, abstract, time.perf_counter() - began


def make_eval_step(model: Model, head: Head, mesh: Mesh) -> EvalStep:
    """Exact evaluation: eval_step(params, batch) -> (sum of target NLL over unmasked tokens,
    token count), both [] float32. The NLL is the head's `target_log_probs`, so the step holds
    [B·T, block] scores, never [B·T, V] (`seqjax.model_head.token_nll`).

    A model that one objective alone trains is scored as that objective says
    (`Objective.eval_sums`, found by `seqjax.objectives.eval_sums_of`), from a fixed key:
    (Σ NLL, token count, {further sums}), e.g. the VAE LM's bound, the BiLM's backward NLL
    beside the forward one, an encoder's masked-token NLL.
    The parameters keep whatever placement they have (any strategy); the batch is split over `data`.
    """

    own_sums = eval_sums_of(model)

    def eval_step(params: Params, batch: Batch) -> tuple[Any, ...]:
        if own_sums is not None:
            return own_sums(model, head, params, batch, jax.random.key(0), ids=SPECIAL_IDS)
        hidden = hidden_states(model, params, batch, jax.random.key(0), train=False)
        nll = token_nll(model, head, params, hidden, batch["targets"])
        return (nll * batch["mask"]).sum(), batch["mask"].sum()

    return jax.jit(
        under_mesh(eval_step, mesh), in_shardings=(None, batch_sharding(mesh)), out_shardings=replicated(mesh)
    )


def batch_scorer(eval_step: EvalStep, params: Params, mesh: Mesh) -> Callable[[Batch], tuple[Any, ...]]:
    """score(host batch) -> (nll_sum, tokens[, further sums]) of `params`: what `evaluation.evaluate` takes."""
    sharding = batch_sharding(mesh)
    return lambda batch: eval_step(params, jax.device_put(batch, sharding))
