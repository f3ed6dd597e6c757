"""The train state and its initialization directly onto the mesh."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from seqjax.contracts import Batch
from seqjax.model_head import init_params
from seqjax.training.sharding import tree_shardings


@flax.struct.dataclass
class TrainState:
    """step: [] int32, updates applied; key: the run's base PRNG key (per-step keys fold in `step`)."""

    step: jax.Array
    params: Any
    opt_state: Any
    key: jax.Array


def state_shardings(state_shape: TrainState, mesh: Mesh, strategy: str = "data") -> TrainState:
    """The NamedSharding of every leaf under `strategy` (data | fsdp | tensor | fsdp_tensor)."""
    return tree_shardings(state_shape, mesh, strategy)


def init_state(
    model: nn.Module,
    head: nn.Module,
    optimizer: optax.GradientTransformation,
    seed: int,
    batch: Batch,
    mesh: Mesh,
    strategy: str = "data",
) -> TrainState:
    """Builds the initial state inside one jit so that it is created already placed on `mesh`:
    a sharded parameter is never materialized whole on one device."""
    batch = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), batch)

    def init(key):
        init_key, run_key = jax.random.split(key)
        params = init_params(model, head, init_key, batch)
        return TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params), run_key)

    key = jax.random.PRNGKey(seed)  # raw uint32 key data: checkpoints store it as a plain array
    shardings = state_shardings(jax.eval_shape(init, key), mesh, strategy)
    return jax.jit(init, out_shardings=shardings)(key)
