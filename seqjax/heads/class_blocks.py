"""The within-class term of the class softmax, scored class by class over rows sorted by class.

−log p(t | c(t), h) needs, for each row, the scores of the words of its target's class only.
Gathering those words per row reads [N, |class|, D] floats, many times the [V, D] table when
several rows share a class. Here the rows are sorted by class instead, and a loop walks the
classes: each class's words are one contiguous slice of the table, read once and multiplied
with that class's rows, ROWS_PER_STEP at a time (a class with more rows takes more steps).
The table is read once per call and the gradient written once, whatever the batch holds.

Static shapes: a slice of the table has a fixed width per tier of similar class sizes (the
largest class of the tier; the extra words are masked), and a step a fixed number of rows
(rows past the class's count are padding whose losses and gradients are dropped). The row
counts are data-dependent, so the loops have data-dependent trip counts; such loops have no
reverse-mode derivative in JAX, and the custom VJP runs the same walk to accumulate the
gradients.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import overload

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

WordParams = tuple[Array, Array]  # the word table [V, D] and biases [V], float32
# What the walk over the classes carries: the losses [N], or the gradients of hidden, the word
# table and the biases when it computes the VJP.
Carry = Array | tuple[Array, Array, Array]

ROWS_PER_STEP = 8  # rows of one class per matmul: ~N / C rows per class with equal-mass classes


@dataclasses.dataclass(frozen=True, eq=False)
class Tier:
    """Classes whose words are scored through windows of one width (numpy, host side).

    classes: [K] int32 class ids; window_starts: [K] int32 first table row of each window,
    moved back where a window would run past the table; shifts: [K] int32 offset of the class's
    first word inside its window; sizes: [K] int32 words of each class; width: the windows' width.
    """

    classes: np.ndarray
    window_starts: np.ndarray
    shifts: np.ndarray
    sizes: np.ndarray
    width: int


def tiers_of(starts: np.ndarray, sizes: np.ndarray, tier_of_class: np.ndarray) -> tuple[Tier, ...]:
    """The `Tier`s of classes [starts, starts + sizes) grouped by `tier_of_class` [C]."""
    vocab_size = int(starts[-1] + sizes[-1])
    tiers = []
    for tier in range(int(tier_of_class.max()) + 1):
        classes = np.nonzero(tier_of_class == tier)[0].astype(np.int32)
        width = int(sizes[classes].max())
        window_starts = np.minimum(starts[classes], vocab_size - width).astype(np.int32)
        shifts = (starts[classes] - window_starts).astype(np.int32)
        tiers.append(Tier(classes, window_starts, shifts, sizes[classes].astype(np.int32), width))
    return tuple(tiers)


def within_class_losses(
    hidden: Array,
    word_weights: Array,
    word_biases: Array | None,
    targets: Array,
    class_of: Array,
    tiers: tuple[Tier, ...],
) -> Array:
    """[N] float32 −log p(t | c(t), h) of each row.

    hidden: [N, D] float32; word_weights: [V, D] float32; word_biases: [V] float32 or None;
    targets: [N] int32; class_of: [N] int32 class of each target; tiers: `Tier`s covering every
    class. Differentiable in hidden, word_weights and word_biases.
    """
    biases = jnp.zeros(word_weights.shape[:1], jnp.float32) if word_biases is None else word_biases
    return _losses(tiers, hidden, (word_weights, biases), targets, class_of)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _losses(tiers: tuple[Tier, ...], hidden: Array, params: WordParams, targets: Array, class_of: Array) -> Array:
    return _walk(tiers, hidden, params, targets, class_of, None)


def _losses_fwd(
    tiers: tuple[Tier, ...], hidden: Array, params: WordParams, targets: Array, class_of: Array
) -> tuple[Array, tuple[Array, WordParams, Array, Array]]:
    return _walk(tiers, hidden, params, targets, class_of, None), (hidden, params, targets, class_of)


def _losses_bwd(
    tiers: tuple[Tier, ...], residuals: tuple[Array, WordParams, Array, Array], loss_grads: Array
) -> tuple[Array, WordParams, None, None]:
    hidden, params, targets, class_of = residuals
    hidden_grad, params_grad = _walk(tiers, hidden, params, targets, class_of, loss_grads)
    return hidden_grad, params_grad, None, None


_losses.defvjp(_losses_fwd, _losses_bwd)


@overload
def _walk(
    tiers: tuple[Tier, ...],
    hidden: Array,
    params: WordParams,
    targets: Array,
    class_of: Array,
    loss_grads: None,
) -> Array: ...


@overload
def _walk(
    tiers: tuple[Tier, ...],
    hidden: Array,
    params: WordParams,
    targets: Array,
    class_of: Array,
    loss_grads: Array,
) -> tuple[Array, WordParams]: ...


def _walk(
    tiers: tuple[Tier, ...],
    hidden: Array,
    params: WordParams,
    targets: Array,
    class_of: Array,
    loss_grads: Array | None,
) -> Array | tuple[Array, WordParams]:
    """The losses [N] (loss_grads None), or their VJP (hidden grad, (weights grad, biases grad))."""
    weights, biases = params
    rows = hidden.shape[0]
    num_classes = int(max(tier.classes.max() for tier in tiers)) + 1
    counts = jnp.zeros((num_classes,), jnp.int32).at[class_of].add(1)
    offsets = jnp.cumsum(counts) - counts
    order = jnp.argsort(class_of, stable=True).astype(jnp.int32)
    # Padded so that a step's slice past the last row is never shifted back to fit.
    order = jnp.concatenate([order, jnp.zeros((ROWS_PER_STEP,), jnp.int32)])
    step_rows = jnp.arange(ROWS_PER_STEP, dtype=jnp.int32)

    def step(carry: Carry, picked: Array, valid: Array, window: Array, width: int, first: Array, size: Array) -> Carry:
        window_weights = lax.dynamic_slice_in_dim(weights, window, width)
        window_biases = lax.dynamic_slice_in_dim(biases, window, width)
        columns = jnp.arange(width, dtype=jnp.int32)
        in_class = (columns >= first) & (columns < first + size)
        row_hidden = hidden[picked]
        scores = jnp.where(in_class, row_hidden @ window_weights.T + window_biases, -jnp.inf)
        target_columns = jnp.clip(targets[picked] - window, 0, width - 1)
        log_normalizers = jax.nn.logsumexp(scores, axis=1)
        if not isinstance(carry, tuple):  # the losses, when loss_grads is None
            target_scores = jnp.take_along_axis(scores, target_columns[:, None], axis=1)[:, 0]
            return carry.at[picked].add(jnp.where(valid, log_normalizers - target_scores, 0.0))
        assert loss_grads is not None  # the gradients' carry comes with them
        hidden_grad, weights_grad, biases_grad = carry
        one_hot = columns[None, :] == target_columns[:, None]
        score_grads = (jnp.exp(scores - log_normalizers[:, None]) - one_hot) * jnp.where(
            valid, loss_grads[picked], 0.0
        )[:, None]
        hidden_grad = hidden_grad.at[picked].add(score_grads @ window_weights)
        window_grad = lax.dynamic_slice_in_dim(weights_grad, window, width) + score_grads.T @ row_hidden
        weights_grad = lax.dynamic_update_slice_in_dim(weights_grad, window_grad, window, 0)
        bias_grad = lax.dynamic_slice_in_dim(biases_grad, window, width) + score_grads.sum(axis=0)
        return hidden_grad, weights_grad, lax.dynamic_update_slice_in_dim(biases_grad, bias_grad, window, 0)

    carry: Carry
    if loss_grads is None:
        carry = jnp.zeros((rows,), jnp.float32)
    else:
        carry = (jnp.zeros_like(hidden), jnp.zeros_like(weights), jnp.zeros_like(biases))
    for tier in tiers:
        tier_arrays = tuple(jnp.asarray(a) for a in (tier.classes, tier.window_starts, tier.shifts, tier.sizes))

        def class_steps(
            index: Array, carry: Carry, tier_arrays: tuple[Array, ...] = tier_arrays, width: int = tier.width
        ) -> Carry:
            class_id, window, first, size = (a[index] for a in tier_arrays)
            count, offset = counts[class_id], offsets[class_id]

            def one_step(number: Array, carry: Carry) -> Carry:
                start = number * ROWS_PER_STEP
                picked = lax.dynamic_slice_in_dim(order, offset + start, ROWS_PER_STEP)
                return step(carry, picked, start + step_rows < count, window, width, first, size)

            return lax.fori_loop(0, (count + ROWS_PER_STEP - 1) // ROWS_PER_STEP, one_step, carry)

        carry = lax.fori_loop(0, tier.classes.size, class_steps, carry)
    if not isinstance(carry, tuple):
        return carry
    hidden_grad, weights_grad, biases_grad = carry
    return hidden_grad, (weights_grad, biases_grad)
