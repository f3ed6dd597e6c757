"""Row-sparse gradients for losses that read few rows of the [V, D] output table.

A sampling loss reads the rows of its targets and samples only, yet the gradient JAX
returns for the whole table is dense: zeros [V, D] plus a scatter, which at V = 100k costs
more than the loss itself. Differentiating with respect to the gathered rows instead gives
the row gradient TensorFlow calls IndexedSlices — [M, D] for the M ids read — and an
optimizer applies it with one scatter into the table:

    ids = jnp.concatenate([targets, samples])
    distinct, local = compact(ids)                   # distinct ids; distinct[local] == ids
    def loss(rows, row_biases):
        return sampled_softmax_loss(hidden, rows, row_biases, local[:N], local[N:],
                                    sample_log_expected_counts, target_log_expected_counts).mean()
    rows_grad, bias_grad = jax.grad(loss, argnums=(0, 1))(weights[distinct], biases[distinct])
    weights = weights.at[distinct].add(-learning_rate * rows_grad)   # in place when donated

The tree softmax needs no renumbering: its loss is a sum over path steps, so
`tree_path_loss` is differentiated with respect to the [N, L, D] node rows gathered along
`tree_paths`, and the path node ids (repeats included) index that row gradient;
`seqjax.heads.tree_rows` scores the top levels densely instead and gathers rows only for the
steps below them, without the [N, L, D] array.

Renumbering keeps equal ids equal, so accidental-hit removal and duplicate samples behave
exactly as on the full table; the padding slots of `distinct` are read by no id and get a
zero gradient.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

from seqjax.heads import checks


def compact(ids: ArrayLike) -> tuple[Array, Array]:
    """The distinct ids among `ids`, and each id's index among them.

    Args:
      ids: int array of any shape (at least one id), values in [0, V).

    Returns:
      distinct: [M] int32, M = ids.size (static, so it works under jit): the distinct ids in
        increasing order, then padding that repeats the smallest id.
      local: int32 of `ids`' shape, with distinct[local] == ids.

    Example:
      >>> import jax.numpy as jnp
      >>> from seqjax.heads.rows import compact
      >>> distinct, local = compact(jnp.array([7, 3, 7, 9]))
      >>> distinct.tolist(), local.tolist()
      ([3, 7, 9, 3], [1, 0, 1, 2])
    """
    checks.require_ids("ids", ids, jnp.iinfo(jnp.int32).max)
    ids = jnp.asarray(ids)
    if ids.size == 0:
        raise ValueError(f"ids must hold at least one id, got shape {ids.shape}")
    flat = ids.reshape(-1)
    distinct, local = jnp.unique(flat, size=flat.size, return_inverse=True)
    return distinct.astype(jnp.int32), local.reshape(ids.shape).astype(jnp.int32)
