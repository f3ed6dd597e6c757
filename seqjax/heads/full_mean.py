"""The full softmax's masked-mean training loss with its gradients made in the forward pass, over
blocks of rows, never holding more than a block's [R, V] logits (Liger's fused linear
cross-entropy, Hsu et al. 2024).

`full_softmax_loss` returns per-row losses, so its backward pass learns each row's weight only
after the forward pass: without the [N, V] exponentials kept, its vocabulary blocks must score
the words again there, four [N, D] x [D, V] matmuls in all. The head's training loss is a masked
mean, whose row weights mask / max(Σ mask, 1) are known before the forward pass: each block of R
rows is scored against the whole table once, and its rows' softmax gradients G [R, V] give at
once the block's hidden gradient G·W and its share Gᵀ·h of the table's — three matmuls, as the
materialized logits take, at [R, V] memory. The backward pass only scales what the forward pass
made by the cotangent of the mean. Evaluated without a gradient, the loss makes none (one matmul).
Under a step's mesh with no more words than rows, each device walks the blocks of its own rows,
and only the table's gradient crosses devices.

Exact: the loss and its gradients equal the materialized softmax's masked mean to float32
rounding (tests/heads/test_full_mean.py), the z-loss included.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import Array, lax
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from seqjax.checks import check_int
from seqjax.heads import checks
from seqjax.placement import batch_split, context_mesh, gathered

ROW_BLOCK_BYTES = 2**29  # a block's [R, V] float32 logits (512 MiB): R = 1024 rows at V = 100k
# Rows per block at least: the table's gradient is read and written whole by each block's Gᵀ·h
# (8·V·D bytes for 2·R·V·D FLOPs), which stays matmul-bound on an H200 (340 TFLOP/s float32 at
# JAX's default precision, 4.2 TB/s sustained) from R = 330 rows.
MIN_BLOCK_ROWS = 512

# The forward pass's gradients of the weighted loss (hidden [N, D], weights [V, D], biases [V])
# and each row's loss where its weight is positive, else 0 ([N], the row weights' gradient).
Residuals = tuple[Array, Array, Array, Array]


def row_block(rows: int, vocab_size: int) -> int:
    """Rows per block when none is given: the largest power of two whose [R, V] float32 logits
    fit ROW_BLOCK_BYTES, at least MIN_BLOCK_ROWS; N itself when all rows fit in one block.

    Example:
      >>> from seqjax.heads.full_mean import row_block
      >>> row_block(16384, 100_000), row_block(16384, 1_000_000), row_block(300, 100_000)
      (1024, 512, 300)
    """
    fitting = 1 << (max(ROW_BLOCK_BYTES // (4 * vocab_size), 1).bit_length() - 1)
    return min(rows, max(fitting, MIN_BLOCK_ROWS))


def mean_softmax_loss(
    hidden: ArrayLike,
    weights: ArrayLike,
    biases: ArrayLike | None,
    targets: ArrayLike,
    mask: ArrayLike | None,
    *,
    block_rows: int | None = None,
    z_loss: float = 0.0,
) -> tuple[Array, dict[str, Array]]:
    """`masked_mean(full_softmax_loss(hidden, weights, biases, targets, z_loss=z_loss), mask)`,
    its gradients made in the forward pass over blocks of rows.

    Args:
      hidden: [N, D] float (computed in float32).
      weights: [V, D] float; biases: [V] float or None.
      targets: [N] int32 ids in [0, V).
      mask: [N] float (1 keeps a row, 0 drops it; a dropped row's loss may be inf or nan) or None.
      block_rows: rows per block R > 0 (the last block padded with dropped rows), of each
        device's own rows where they are split (below). None: `row_block` of the rows walked.
      z_loss: weight >= 0 of each row's squared log-normalizer.

    Returns:
      (loss [] float32, {"tokens": [] float32 Σ mask}).

    Example:
      >>> import jax.numpy as jnp
      >>> from seqjax.heads.full_mean import mean_softmax_loss
      >>> hidden, weights = jnp.zeros((3, 4)), jnp.ones((10, 4))  # equal scores: uniform over 10
      >>> loss, aux = mean_softmax_loss(hidden, weights, None, jnp.array([0, 9, 2]), jnp.array([1.0, 1.0, 0.0]))
      >>> round(float(loss), 4), float(aux["tokens"])  # log 10
      (2.3026, 2.0)
    """
    vocab_size, _ = checks.require_output_layer(hidden, weights, biases, targets)
    rows = int(jnp.shape(hidden)[0])
    if isinstance(z_loss, bool) or not isinstance(z_loss, (int, float)) or not 0.0 <= z_loss < float("inf"):
        raise ValueError(f"z_loss must be a finite float >= 0 (0: off), got {z_loss!r}")
    hidden, targets = jnp.asarray(hidden, jnp.float32), jnp.asarray(targets, jnp.int32)
    weights = jnp.asarray(weights, jnp.float32)
    biases = jnp.zeros((vocab_size,), jnp.float32) if biases is None else jnp.asarray(biases, jnp.float32)
    mask = jnp.ones((rows,), jnp.float32) if mask is None else jnp.asarray(mask, jnp.float32)
    tokens = mask.sum()
    row_weights = jnp.where(mask > 0, mask, 0.0) / jnp.maximum(tokens, 1.0)
    # Left to the compiler, a scan over blocks of rows split across devices gathers the rows to
    # every device (an 8 x H100 step of 131,072 rows at V = 32,000 gathered 12 GiB and scored
    # every block on every device). Each device walks its own rows instead, against the whole
    # table (gathered once, as the in_specs say), and the table's [V, D] gradient is summed over
    # the batch axes: fewer bytes than the [N, D] rows while V <= N. A larger table stays with the
    # compiler, whose program moved less for it (an 800k-word LSTM under FSDP on 8 x H100: 1.1 GiB
    # a step against 4.0 split by rows).
    mesh = context_mesh()
    split = () if mesh is None or vocab_size > rows else batch_split(mesh, rows)
    walks: int = 1 if mesh is None else math.prod(mesh.shape[axis] for axis in split)
    block = row_block(rows // walks, vocab_size) if block_rows is None else check_int("block_rows", block_rows)
    total = functools.partial(_rows_loss, block, float(z_loss))
    if mesh is None or not split:
        return total(hidden, weights, biases, targets, row_weights), {"tokens": tokens}
    split_rows = P(split)
    per_device = jax.shard_map(
        lambda *arrays: total(*arrays)[None],
        mesh=mesh,
        in_specs=(split_rows, P(), P(), split_rows, split_rows),
        out_specs=split_rows,
        check_vma=False,  # the custom VJP's table gradients vary over devices until summed
    )
    return per_device(hidden, weights, biases, targets, row_weights).sum(), {"tokens": tokens}


def _rows_loss(
    block: int, z_loss: float, hidden: Array, weights: Array, biases: Array, targets: Array, row_weights: Array
) -> Array:
    """Σ_n row_weights_n · loss_n over these rows, [] float32, in blocks of `block` rows (at most
    N; dropped rows of weight 0 fill the last block)."""
    rows = hidden.shape[0]
    block = min(block, rows)
    padding = -rows % block
    if padding:
        hidden = jnp.pad(hidden, ((0, padding), (0, 0)))
        targets, row_weights = jnp.pad(targets, (0, padding)), jnp.pad(row_weights, (0, padding))
    return _weighted_loss(hidden, weights, biases, targets, row_weights, block, z_loss)


def _block_losses(
    hidden: Array, weights: Array, biases: Array, targets: Array, z_loss: float
) -> tuple[Array, Array, Array]:
    """A block's logits [R, V], row log-normalizers [R] and losses [R] (z-loss included)."""
    logits = hidden @ weights.T + biases
    log_normalizer = jax.nn.logsumexp(logits, axis=1)
    target_logits = jnp.take_along_axis(logits, targets[:, None], axis=1)[:, 0]
    return logits, log_normalizer, log_normalizer - target_logits + z_loss * log_normalizer**2


def _blocks(hidden: Array, targets: Array, row_weights: Array, block: int) -> tuple[Array, Array, Array]:
    """hidden [N, D], targets [N] and row weights [N] as [N / block, block, ...]: what the scans walk."""
    count = hidden.shape[0] // block
    return hidden.reshape(count, block, -1), targets.reshape(count, block), row_weights.reshape(count, block)


def _kept(row_weights: Array, losses: Array) -> Array:
    """Σ over the rows of weight · loss, a row of weight 0 contributing 0 whatever its loss."""
    return jnp.where(row_weights > 0, row_weights * losses, 0.0)


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _weighted_loss(
    hidden: Array, weights: Array, biases: Array, targets: Array, row_weights: Array, block: int, z_loss: float
) -> Array:
    """Σ_n row_weights_n · loss_n, [] float32; N a multiple of `block`."""
    weights, biases = gathered(weights), gathered(biases)  # once, not one whole table per block

    def step(total: Array, scanned: tuple[Array, Array, Array]) -> tuple[Array, None]:
        block_hidden, block_targets, block_weights = scanned
        losses = _block_losses(block_hidden, weights, biases, block_targets, z_loss)[2]
        return total + _kept(block_weights, losses).sum(), None

    total, _ = lax.scan(step, jnp.zeros((), jnp.float32), _blocks(hidden, targets, row_weights, block))
    return total


def _weighted_loss_fwd(
    hidden: Array, weights: Array, biases: Array, targets: Array, row_weights: Array, block: int, z_loss: float
) -> tuple[Array, Residuals]:
    weights, biases = gathered(weights), gathered(biases)
    vocab_size = weights.shape[0]

    def step(
        carry: tuple[Array, Array, Array], scanned: tuple[Array, Array, Array]
    ) -> tuple[tuple[Array, Array, Array], tuple[Array, Array]]:
        total, weights_grad, biases_grad = carry
        block_hidden, block_targets, block_weights = scanned
        logits, log_normalizer, losses = _block_losses(block_hidden, weights, biases, block_targets, z_loss)
        # d loss_n / d logit_nv = p_nv (1 + 2 z log Z_n) - [v = t_n], times the row's weight (0 for
        # a dropped row); the one-hot part as a compare in the same elementwise pass, no [R, V] one-hot.
        scale = block_weights * (1.0 + 2.0 * z_loss * log_normalizer)
        probs = jnp.exp(logits - log_normalizer[:, None]) * scale[:, None]
        is_target = jnp.arange(vocab_size, dtype=jnp.int32)[None, :] == block_targets[:, None]
        logit_grads = jnp.where(is_target, probs - block_weights[:, None], probs)
        carry = (
            total + _kept(block_weights, losses).sum(),
            weights_grad + logit_grads.T @ block_hidden,
            biases_grad + logit_grads.sum(axis=0),
        )
        return carry, (logit_grads @ weights, jnp.where(block_weights > 0, losses, 0.0))

    zeros = (jnp.zeros((), jnp.float32), jnp.zeros_like(weights), jnp.zeros_like(biases))
    scanned = _blocks(hidden, targets, row_weights, block)
    (total, weights_grad, biases_grad), (hidden_grad, losses) = lax.scan(step, zeros, scanned)
    return total, (hidden_grad.reshape(hidden.shape), weights_grad, biases_grad, losses.reshape(-1))


def _weighted_loss_bwd(
    block: int, z_loss: float, residuals: Residuals, loss_grad: Array
) -> tuple[Array, Array, Array, None, Array]:
    hidden_grad, weights_grad, biases_grad, losses = residuals
    return loss_grad * hidden_grad, loss_grad * weights_grad, loss_grad * biases_grad, None, loss_grad * losses


_weighted_loss.defvjp(_weighted_loss_fwd, _weighted_loss_bwd)
