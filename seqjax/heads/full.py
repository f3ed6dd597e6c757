"""Exact softmax cross-entropy over the whole vocabulary, optionally without [N, V] logits.

Two exact formulations, chosen by shape unless the caller fixes `chunk_size`:
* materialized: one [N, D] x [D, V] matmul, a fused logsumexp and autodiff (peak memory
  [N, V] float32 logits and their gradient, three matmuls in all);
* blocked (`chunk_size=C < V`): blocks of C words under a custom VJP. What it keeps for the
  backward pass is `block_residuals`: each block's exponentials exp(logits - block max) in
  float32 or bfloat16 with the blocks' row maxima (three matmuls; N·V values kept, 2048 x 100k
  in float32 is 0.8 GB), or nothing but the row log-normalizers ("recompute": each block's
  logits again in the backward pass, four matmuls, peak memory [N, C]). No one-hot matrix.
Measured on 2-core CPUs (N = 2048, D = 512), the materialized form wins while the logits stay
small (V = 10k: 6-14% faster) and the blocked one once they leave the caches (V = 30k: 5-7%
faster; V = 100k: 1.2-1.5x faster with 20x fewer temporaries, when it still recomputed), so the
default materializes up to MATERIALIZE_LIMIT logits and uses blocks of DEFAULT_CHUNK words
beyond. Without gradients (exact evaluation, the heads' `target_log_probs`) blocks win at every
shape measured (same machines, V = 5k-30k, N = 256-2048, D = 128-512: 1.1-2.0x faster than
materialized logits), so evaluation always passes `chunk_size=DEFAULT_CHUNK`; it keeps nothing.

What the blocks keep by default is exact: float32 exponentials while they take at most
KEEP_LIMIT_BYTES, else recomputed logits (`default_block_residuals`); the loss and its gradients
then equal the materialized softmax's to float32 rounding. bfloat16 exponentials are asked for
(`block_residuals="bfloat16"`), or what a head keeps in a run of bfloat16 matmuls
(`train.precision=bfloat16`), half the memory: bfloat16 rounds each kept exponential to 8
significant bits, so every probability in the backward pass is within a relative 2^-8 of
float32's and each gradient entry moves by at most 2^-8 of the same sum over absolute values (a
test checks that bound); the loss itself is computed in float32 either way. Measured against
float32's gradients, relative to each gradient's largest entry: peaked softmaxes (N = 512,
D = 256, V = 30k, word vectors N(0, 0.2²)) move the hidden gradient by 5e-4, the word vectors'
by 8e-5, the biases' by 1e-5; flat ones (N = 2048, D = 512, V = 30k-100k, word vectors
N(0, 0.05²)) by 2e-5, 5e-7 and 1e-7.

Both paths can add PaLM's z-loss, `z_loss · (log Z)²` per row (Chowdhery et al. 2022, who
used 1e-4), which pulls the log-normalizer log Z = logsumexp(logits) toward 0 and so keeps
logits from drifting in low-precision training; its gradient 2·z_loss·log Z·softmax joins
the softmax's own.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax
from jax.typing import ArrayLike

from seqjax.checks import check_int
from seqjax.heads import checks
from seqjax.placement import gathered

MATERIALIZE_LIMIT = 2**25  # N·V logits (128 MiB of float32) up to which the default materializes them
DEFAULT_CHUNK = 4096  # words per block beyond it (measured best of 2k/4k/8k at V = 30k-100k)
KEEP_LIMIT_BYTES = 2**30  # kept exponentials (N·V of them) up to which the default keeps them
BLOCK_RESIDUALS = ("bfloat16", "float32", "recompute")
KEPT_BYTES = {"float32": 4, "bfloat16": 2}  # a kept exponential's size at each precision the default keeps

# What the forward pass keeps of a block for the backward pass: its exponentials exp(logits -
# block max) [.., N, C] (float32, or bfloat16 bits as uint16) and row maxima [.., N] float32;
# None when it recomputes them.
Saved = tuple[Array, Array] | None
# hidden, weights, biases, targets, the row log-normalizers [N], the scanned blocks' Saved and
# the remainder block's.
Residuals = tuple[Array, Array, Array, Array, Array, Saved, Saved]


def default_chunk_size(rows: int, vocab_size: int) -> int:
    """The block size `full_softmax_loss` uses when none is given: V (materialized logits)
    while N·V <= MATERIALIZE_LIMIT, else DEFAULT_CHUNK (at most V).

    Example:
      >>> from seqjax.heads.full import default_chunk_size
      >>> default_chunk_size(2048, 10_000), default_chunk_size(2048, 100_000)
      (10000, 4096)
    """
    return vocab_size if rows * vocab_size <= MATERIALIZE_LIMIT else min(DEFAULT_CHUNK, vocab_size)


def default_block_residuals(rows: int, vocab_size: int, precision: str = "float32") -> str:
    """What the blocked loss keeps when none is said: exponentials at `precision` (a key of
    KEPT_BYTES: "float32", exact, for the pure loss and a float32 run; "bfloat16" in a run of
    bfloat16 matmuls) while their N·V values fit KEEP_LIMIT_BYTES (three matmuls), else
    "recompute" (four, [N, C] memory).

    Example:
      >>> from seqjax.heads.full import default_block_residuals
      >>> default_block_residuals(2048, 100_000), default_block_residuals(2048, 200_000)
      ('float32', 'recompute')
      >>> default_block_residuals(2048, 200_000, "bfloat16")
      'bfloat16'
    """
    if precision not in KEPT_BYTES:
        raise ValueError(f"precision must be one of {', '.join(KEPT_BYTES)}, got {precision!r}")
    return precision if KEPT_BYTES[precision] * rows * vocab_size <= KEEP_LIMIT_BYTES else "recompute"


def full_softmax_loss(
    hidden: ArrayLike,
    weights: ArrayLike,
    biases: ArrayLike | None,
    targets: ArrayLike,
    *,
    chunk_size: int | None = None,
    z_loss: float = 0.0,
    block_residuals: str | None = None,
) -> Array:
    """Per-row negative log-likelihood of the full softmax, `logsumexp(h W^T + b) - (h·w_t + b_t)`,
    plus `z_loss · logsumexp(h W^T + b)²`.

    Args:
      hidden: [N, D] float (computed in float32).
      weights: [V, D] float, one output vector per word.
      biases: [V] float or None.
      targets: [N] int32 ids in [0, V).
      chunk_size: words per vocabulary block C > 0; C >= V materializes the [N, V] logits,
        C < V never holds more than [N, C] of them (the blocks are `dividing_block(V, C)`
        words); both give the same value and gradients.
        None (default): `default_chunk_size(N, V)`, the faster of the two for the shapes.
      z_loss: weight >= 0 of the squared log-normalizer (0: the plain negative log-likelihood).
      block_residuals: what the blocked path keeps for its backward pass, one of
        BLOCK_RESIDUALS: each block's exponentials in "float32" or "bfloat16" (three matmuls;
        bfloat16 halves their memory and moves the gradients by up to 2^-8 of their sums over
        absolute values, the module's docstring says how much) or nothing ("recompute", four);
        ignored when the logits are materialized. None (default): `default_block_residuals(N,
        V)`, float32 or recompute: both agree with the materialized logits to float32 rounding.

    Returns:
      [N] float32 losses (the caller masks and reduces).

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import full_softmax_loss
      >>> hidden, weights = jnp.zeros((2, 4)), jnp.ones((10, 4))  # equal scores: uniform over 10
      >>> loss = full_softmax_loss(hidden, weights, None, jnp.array([0, 9]))
      >>> print(np.asarray(loss).round(4), loss.dtype)  # log 10
      [2.3026 2.3026] float32
    """
    vocab_size, _ = checks.require_output_layer(hidden, weights, biases, targets)
    if chunk_size is None:
        chunk_size = default_chunk_size(int(np.shape(hidden)[0]), vocab_size)
    check_int("chunk_size", chunk_size)
    if isinstance(z_loss, bool) or not isinstance(z_loss, (int, float)) or not 0.0 <= z_loss < float("inf"):
        raise ValueError(f"z_loss must be a finite float >= 0 (0: off), got {z_loss!r}")
    if block_residuals is None:
        block_residuals = default_block_residuals(int(np.shape(hidden)[0]), vocab_size)
    if block_residuals not in BLOCK_RESIDUALS:
        raise ValueError(f"block_residuals must be one of {', '.join(BLOCK_RESIDUALS)}, got {block_residuals!r}")
    hidden, targets = jnp.asarray(hidden, jnp.float32), jnp.asarray(targets)
    weights = jnp.asarray(weights, jnp.float32)
    biases = jnp.zeros((vocab_size,), jnp.float32) if biases is None else jnp.asarray(biases, jnp.float32)
    if chunk_size >= vocab_size:
        logits = hidden @ weights.T + biases
        target_logits = jnp.take_along_axis(logits, targets[:, None], axis=1)[:, 0]
        log_normalizer = jax.nn.logsumexp(logits, axis=1)
        return log_normalizer - target_logits + z_loss * log_normalizer**2
    block = dividing_block(vocab_size, chunk_size)
    return _blocked_loss(hidden, weights, biases, targets, block, float(z_loss), block_residuals)


def dividing_block(vocab_size: int, chunk_size: int) -> int:
    """The block the blocked loss scans: the largest divisor of V in [C/2, C], else C itself.

    With no remainder block, the scanned blocks' weight gradients [V / b, b, D] are the table's
    gradient as they stand (a reshape); a remainder block joins them by a concatenation, which
    writes a second [V, D] array (at V = 100k, N = 2048, D = 512 the recomputing loss's
    temporaries measured 242 MiB with blocks of 4096 words and a remainder, 55 MiB with blocks of 4000).

    Example:
      >>> from seqjax.heads.full import dividing_block
      >>> dividing_block(100_000, 4096), dividing_block(32_003, 4096)
      (4000, 4096)
    """
    divisors = [size for size in range(chunk_size, (chunk_size + 1) // 2 - 1, -1) if vocab_size % size == 0]
    return divisors[0] if divisors else chunk_size


def _block_logits(hidden: Array, weights: Array, biases: Array, start: int | Array, size: int) -> Array:
    block_weights = lax.dynamic_slice_in_dim(weights, start, size)
    block_biases = lax.dynamic_slice_in_dim(biases, start, size)
    return hidden @ block_weights.T + block_biases


def _block_starts(vocab_size: int, block: int) -> tuple[Array, int | None, int]:
    """Starts of the full blocks (scanned) and of the remainder block (None if V % block == 0)."""
    num_full = vocab_size // block
    starts = jnp.arange(num_full, dtype=jnp.int32) * block
    remainder = vocab_size - num_full * block
    return starts, (num_full * block if remainder else None), remainder


def _keep(exponentials: Array, kept: str) -> Array:
    """float32 values as `kept` says: themselves, or rounded to bfloat16 (to nearest, ties to even)
    as the uint16 of its bits: XLA on CPU converts to bfloat16 2.4x slower than this integer form."""
    if kept == "float32":
        return exponentials
    bits = lax.bitcast_convert_type(exponentials, jnp.uint32)
    bits = bits + jnp.uint32(0x7FFF) + ((bits >> 16) & 1)  # exponentials lie in [0, 1]: no overflow
    result: Array = (bits >> 16).astype(jnp.uint16)
    return result


def _unkeep(kept_values: Array) -> Array:
    """float32 of what `_keep` returned."""
    if kept_values.dtype == jnp.float32:
        return kept_values
    return lax.bitcast_convert_type(kept_values.astype(jnp.uint32) << 16, jnp.float32)


def _forward(
    hidden: Array, weights: Array, biases: Array, targets: Array, block: int, z_loss: float, kept: str
) -> tuple[Array, Array, Saved, Saved]:
    """Per-row losses (z-loss included), row log-normalizers [N], and what the backward pass
    reads instead of recomputing the logits: for the scanned blocks and for the remainder
    block, each block's exponentials exp(logits - block max) [.., N, C] in `kept` and its row
    maxima [.., N] float32 (None when `kept` is "recompute")."""
    weights, biases = gathered(weights), gathered(biases)  # once, not one whole table per block
    vocab_size = weights.shape[0]
    starts, remainder_start, remainder = _block_starts(vocab_size, block)

    def accumulate(carry: tuple[Array, Array], logits: Array) -> tuple[tuple[Array, Array], Saved]:
        running_max, running_sum = carry
        block_max = logits.max(axis=1)
        exponentials = jnp.exp(logits - block_max[:, None])
        new_max = jnp.maximum(running_max, block_max)
        running_sum = running_sum * jnp.exp(running_max - new_max)
        running_sum = running_sum + exponentials.sum(axis=1) * jnp.exp(block_max - new_max)
        saved = None if kept == "recompute" else (_keep(exponentials, kept), block_max)
        return (new_max, running_sum), saved

    def step(carry: tuple[Array, Array], start: Array) -> tuple[tuple[Array, Array], Saved]:
        return accumulate(carry, _block_logits(hidden, weights, biases, start, block))

    rows = hidden.shape[0]
    carry = (jnp.full((rows,), -jnp.inf, jnp.float32), jnp.zeros((rows,), jnp.float32))
    carry, saved_blocks = lax.scan(step, carry, starts)
    saved_rest = None
    if remainder_start is not None:
        carry, saved_rest = accumulate(carry, _block_logits(hidden, weights, biases, remainder_start, remainder))
    running_max, running_sum = carry
    log_normalizer = running_max + jnp.log(running_sum)
    target_logits = jnp.einsum("nd,nd->n", hidden, weights[targets]) + biases[targets]
    losses = log_normalizer - target_logits + z_loss * log_normalizer**2
    return losses, log_normalizer, saved_blocks, saved_rest


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _blocked_loss(
    hidden: Array, weights: Array, biases: Array, targets: Array, block: int, z_loss: float, kept: str
) -> Array:
    return _forward(hidden, weights, biases, targets, block, z_loss, "recompute")[0]


def _blocked_loss_fwd(
    hidden: Array, weights: Array, biases: Array, targets: Array, block: int, z_loss: float, kept: str
) -> tuple[Array, Residuals]:
    losses, log_normalizer, saved_blocks, saved_rest = _forward(hidden, weights, biases, targets, block, z_loss, kept)
    return losses, (hidden, weights, biases, targets, log_normalizer, saved_blocks, saved_rest)


def _blocked_loss_bwd(
    block: int, z_loss: float, kept: str, residuals: Residuals, loss_grads: Array
) -> tuple[Array, Array, Array, None]:
    hidden, weights, biases, targets, log_normalizer, saved_blocks, saved_rest = residuals
    weights, biases = gathered(weights), gathered(biases)
    vocab_size = weights.shape[0]
    starts, remainder_start, remainder = _block_starts(vocab_size, block)
    # d (z · log Z²) / d logit_nv = 2 z log Z_n p_nv: the softmax part's weight grows by it.
    softmax_grads = loss_grads * (1.0 + 2.0 * z_loss * log_normalizer)

    # d loss_n / d logit_nv = p_nv - [v = t_n]; the softmax part is done block by block here,
    # the one-hot part as a gather/scatter of N rows below, never as an [N, V] matrix. Each
    # block's weight and bias gradients are the scan's outputs, stacked into the table's
    # gradient after it: written into a [V, D] carry instead, a table split over devices (FSDP)
    # was gathered whole at every block to take one block's update. The two products read the
    # probabilities [N, C] as they are: a row-major copy of their transpose for Pᵀ·h (what
    # lifts the layers' weight gradients on AMD CPUs, `rows_matmul`) measured slower on Intel.
    # The bias gradient Σ_n P is the last column of Pᵀ·[h, 1]: the same product, one column
    # wider, where a column sum of P read it again (the whole loss 8% faster at V = 100k, 2 cores).
    rows, features = hidden.shape
    hidden_and_ones = jnp.concatenate([hidden, jnp.ones((rows, 1), hidden.dtype)], axis=1)

    def block_grads(
        hidden_grad: Array, start: int | Array, size: int, saved: Saved
    ) -> tuple[Array, tuple[Array, Array]]:
        if saved is None:
            logits = _block_logits(hidden, weights, biases, start, size)
            probs = jnp.exp(logits - log_normalizer[:, None]) * softmax_grads[:, None]
        else:
            exponentials, block_max = saved
            scale = jnp.exp(block_max - log_normalizer) * softmax_grads
            probs = _unkeep(exponentials) * scale[:, None]
        hidden_grad = hidden_grad + probs @ lax.dynamic_slice_in_dim(weights, start, size)
        table_grads = probs.T @ hidden_and_ones
        return hidden_grad, (table_grads[:, :features], table_grads[:, features])

    def step(hidden_grad: Array, scanned: tuple[Array, Saved]) -> tuple[Array, tuple[Array, Array]]:
        start, saved = scanned
        return block_grads(hidden_grad, start, block, saved)

    hidden_grad, (weight_blocks, bias_blocks) = lax.scan(step, jnp.zeros_like(hidden), (starts, saved_blocks))
    weights_grad, biases_grad = weight_blocks.reshape(-1, weights.shape[1]), bias_blocks.reshape(-1)
    if remainder_start is not None:
        hidden_grad, (weight_rest, bias_rest) = block_grads(hidden_grad, remainder_start, remainder, saved_rest)
        weights_grad = jnp.concatenate([weights_grad, weight_rest])
        biases_grad = jnp.concatenate([biases_grad, bias_rest])
    hidden_grad = hidden_grad - loss_grads[:, None] * weights[targets]
    weights_grad = weights_grad.at[targets].add(-loss_grads[:, None] * hidden)
    biases_grad = biases_grad.at[targets].add(-loss_grads)
    return hidden_grad, weights_grad, biases_grad, None


_blocked_loss.defvjp(_blocked_loss_fwd, _blocked_loss_bwd)
