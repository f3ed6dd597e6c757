"""The within-class term of the class softmax, scored class by class over rows sorted by class.

−log p(t | c(t), h) needs, for each row, the scores of the words of its target's class only.
Gathering those words per row reads [N, |class|, D] floats, many times the [V, D] table when
several rows share a class. Here the rows are sorted by class instead, and a loop walks the
classes: each class's words are one contiguous slice of the table, read once and multiplied
with that class's rows, `rows_per_step` at a time (a class with more rows takes more steps).
The table is read once per call and the gradient written once, whatever the batch holds.

The steps run one after another, so their number sets the time where each is too small to fill
the device (a GPU's launches): a step holds about the rows a class expects, N / C with
equal-mass classes, and the walk takes between C and 2C steps whatever N is.

Static shapes: a slice of the table has a fixed width per tier of similar class sizes (the
largest class of the tier; the extra words are masked), and a step a fixed number of rows
(rows past the class's count are padding whose losses and gradients are dropped). How many
steps a class takes depends on the batch, so each tier walks a fixed number of step slots, its
capacity (`slot_capacities`: the steps the tier takes in 90% of batches drawn from the classes'
shares of the words' counts), each slot finding its class and part on the device; slots past
the tier's steps are padding. The steps beyond a capacity, which a batch rarely has, take a loop
whose trip count depends on the data. A GPU runs a loop of known trip count from the host
without waiting, but reads the condition of any other loop on the host before every trip and
once more to stop (about 20 µs each on an H200, more than a step's work): per tier, the walk
waits once where its steps fit its slots. (A conditional skipping those loops would wait once
for all, but keeps a second copy of the table's gradient.) Loops with data-dependent trip
counts have no reverse-mode derivative in JAX, so the custom VJP runs the same walk to
accumulate the gradients.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax
from jax.sharding import PartitionSpec as P

from seqjax.checks import check_int
from seqjax.placement import batch_split, context_mesh, device_rows, gathered

WordParams = tuple[Array, Array]  # the word table [V, D] and biases [V], float32
Grads = tuple[Array, Array, Array]  # the gradients of hidden, the word table and the biases
Carry = TypeVar("Carry")  # what the walk over the classes carries: the losses [N], or Grads

MIN_ROWS_PER_STEP = 8
# Each tier's loops are traced in a scope of this name and the tier's index, which the compiled
# program's metadata keeps: a profile, or an estimate given each tier's steps, tells them apart.
TIER_SCOPE = "class_walk_tier"
CAPACITY_DRAWS = 64  # batches drawn to size the tiers' slots (`slot_capacities`)
# The share of drawn batches a tier's slots hold: a slot that a batch leaves empty costs a step's
# work, a step beyond the slots a round trip to the host on a GPU (20 µs) besides its work.
CAPACITY_QUANTILE = 0.9


@dataclasses.dataclass(frozen=True, eq=False)
class Tier:
    """Classes whose words are scored through windows of one width (numpy, host side).

    classes: [K] int32 class ids; window_starts: [K] int32 first table row of each window,
    moved back where a window would run past the table; shifts: [K] int32 offset of the class's
    first word inside its window; sizes: [K] int32 words of each class; width: the windows' width;
    shares: [K] float64 each class's share of the words' counts, or None where not known.
    """

    classes: np.ndarray
    window_starts: np.ndarray
    shifts: np.ndarray
    sizes: np.ndarray
    width: int
    shares: np.ndarray | None = None


class Step(NamedTuple):
    """One step of the walk: up to `rows_per_step` rows of one class and that class's window.

    picked: [R] int32 rows; valid: [R] bool, a row of the class (not padding); window: []
    int32 first table row of the window; width: its width (static); first: [] int32 the
    class's first column in the window; size: [] int32 the class's words.
    """

    picked: Array
    valid: Array
    window: Array
    width: int
    first: Array
    size: Array


def rows_per_step(rows: int, num_classes: int) -> int:
    """Rows of one class per step: N / C, what each of C equal-mass classes expects of N rows,
    rounded up to a power of two, at least MIN_ROWS_PER_STEP.

    Example:
      >>> from seqjax.heads.class_blocks import rows_per_step
      >>> [rows_per_step(n, c) for n, c in ((43, 3), (512, 100), (4096, 182), (16384, 317), (5, 1))]
      [16, 8, 32, 64, 8]
    """
    return 1 << (max(MIN_ROWS_PER_STEP, -(-rows // num_classes)) - 1).bit_length()


def tiers_of(
    starts: np.ndarray, sizes: np.ndarray, tier_of_class: np.ndarray, shares: np.ndarray | None = None
) -> tuple[Tier, ...]:
    """The `Tier`s of classes [starts, starts + sizes) grouped by `tier_of_class` [C], with the
    classes' shares [C] of the words' counts where given."""
    vocab_size = int(starts[-1] + sizes[-1])
    tiers = []
    for tier in range(int(tier_of_class.max()) + 1):
        classes = np.nonzero(tier_of_class == tier)[0].astype(np.int32)
        width = int(sizes[classes].max())
        window_starts = np.minimum(starts[classes], vocab_size - width).astype(np.int32)
        shifts = (starts[classes] - window_starts).astype(np.int32)
        tier_shares = None if shares is None else np.asarray(shares, np.float64)[classes]
        tiers.append(Tier(classes, window_starts, shifts, sizes[classes].astype(np.int32), width, tier_shares))
    return tuple(tiers)


def slot_capacities(tiers: tuple[Tier, ...], rows: int, step_rows: int, seed: int = 0) -> tuple[int, ...]:
    """Each tier's step slots for a batch of `rows` rows (host): the steps of `step_rows` rows
    that CAPACITY_QUANTILE of CAPACITY_DRAWS batches drawn from the classes' shares take in the
    tier or fewer (seeded: the same capacities for the same shapes). All zero where the tiers
    have no shares.

    Example:
      >>> import numpy as np
      >>> from seqjax.heads.class_blocks import slot_capacities, tiers_of
      >>> starts, sizes = np.array([0, 1, 2]), np.array([1, 1, 4])
      >>> tiers = tiers_of(starts, sizes, np.array([0, 0, 1]), shares=np.array([0.5, 0.2, 0.3]))
      >>> slot_capacities(tiers, rows=64, step_rows=8)  # about 32 + 13 rows (6 steps) and 19 (3)
      (7, 3)
    """
    if any(tier.shares is None for tier in tiers):
        return (0,) * len(tiers)
    shares = np.zeros(_num_classes(tiers))
    for tier in tiers:
        shares[tier.classes] = tier.shares
    drawn = np.random.default_rng(seed).multinomial(rows, shares / shares.sum(), size=CAPACITY_DRAWS)
    steps = -(-drawn // step_rows)
    return tuple(
        int(np.quantile(steps[:, tier.classes].sum(axis=1), CAPACITY_QUANTILE, method="higher")) for tier in tiers
    )


def within_class_losses(
    hidden: Array,
    word_weights: Array,
    word_biases: Array | None,
    targets: Array,
    class_of: Array,
    tiers: tuple[Tier, ...],
    step_rows: int = 0,
) -> Array:
    """[N] float32 −log p(t | c(t), h) of each row.

    hidden: [N, D] float32; word_weights: [V, D] float32; word_biases: [V] float32 or None;
    targets: [N] int32; class_of: [N] int32 class of each target; tiers: `Tier`s covering every
    class; step_rows: rows per step, 0 for `rows_per_step` of N and the classes. Differentiable
    in hidden, word_weights and word_biases. Where the tiers carry the classes' shares, each
    walks `slot_capacities` step slots of known count before any steps beyond them.
    """
    step_rows = check_int("step_rows", step_rows, minimum=0)
    biases = jnp.zeros(word_weights.shape[:1], jnp.float32) if word_biases is None else word_biases
    params = (word_weights, biases)
    mesh = context_mesh()
    split = () if mesh is None else batch_split(mesh, hidden.shape[0])
    if mesh is None or not split:
        # One walk over every row. Under a step's mesh, the table each step reads a window of
        # and the rows it picks across the batch are made whole on every device once, not
        # gathered at each step.
        hidden, targets, class_of, params = jax.tree.map(gathered, (hidden, targets, class_of, params))
        return _losses(_plan(tiers, step_rows, hidden.shape[0]), hidden, params, targets, class_of)
    # Each device walks its own rows against the whole table (gathered once, as the in_specs
    # say); the table's gradient is summed over the batch axes once.
    rows = P(split)
    walk = jax.shard_map(
        functools.partial(_losses, _plan(tiers, step_rows, device_rows(hidden.shape[0]))),
        mesh=mesh,
        in_specs=(rows, (P(), P()), rows, rows),
        out_specs=rows,
        check_vma=False,  # the walk's loop carries start as zeros, unvarying, and end varying
    )
    losses: Array = walk(hidden, params, targets, class_of)
    return losses


class Plan(NamedTuple):
    """A walk's static choices: the tiers, the rows a step holds, and each tier's step slots."""

    tiers: tuple[Tier, ...]
    step_rows: int
    capacities: tuple[int, ...]


def _plan(tiers: tuple[Tier, ...], step_rows: int, rows: int) -> Plan:
    """The walk of `rows` rows (each device's, under a mesh) in steps of `step_rows` (0: chosen)."""
    step_rows = step_rows or rows_per_step(rows, _num_classes(tiers))
    return Plan(tiers, step_rows, slot_capacities(tiers, rows, step_rows))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _losses(plan: Plan, hidden: Array, params: WordParams, targets: Array, class_of: Array) -> Array:
    def add_step(losses: Array, step: Step) -> Array:
        scores, target_columns, log_normalizers = _step_scores(hidden, params, targets, step)
        target_scores = jnp.take_along_axis(scores, target_columns[:, None], axis=1)[:, 0]
        return losses.at[step.picked].add(jnp.where(step.valid, log_normalizers - target_scores, 0.0))

    return _walk(plan, class_of, add_step, jnp.zeros((hidden.shape[0],), jnp.float32))


def _losses_fwd(
    plan: Plan, hidden: Array, params: WordParams, targets: Array, class_of: Array
) -> tuple[Array, tuple[Array, WordParams, Array, Array]]:
    losses = _losses(plan, hidden, params, targets, class_of)
    return losses, (hidden, params, targets, class_of)


def _losses_bwd(
    plan: Plan, residuals: tuple[Array, WordParams, Array, Array], loss_grads: Array
) -> tuple[Array, WordParams, None, None]:
    hidden, params, targets, class_of = residuals
    weights, biases = params

    def add_step(grads: Grads, step: Step) -> Grads:
        hidden_grad, weights_grad, biases_grad = grads
        picked, window, width = step.picked, step.window, step.width
        scores, target_columns, log_normalizers = _step_scores(hidden, params, targets, step)
        one_hot = jnp.arange(width, dtype=jnp.int32)[None, :] == target_columns[:, None]
        row_grads = jnp.where(step.valid, loss_grads[picked], 0.0)
        score_grads = (jnp.exp(scores - log_normalizers[:, None]) - one_hot) * row_grads[:, None]
        hidden_grad = hidden_grad.at[picked].add(score_grads @ lax.dynamic_slice_in_dim(weights, window, width))
        window_grad = lax.dynamic_slice_in_dim(weights_grad, window, width) + score_grads.T @ hidden[picked]
        weights_grad = lax.dynamic_update_slice_in_dim(weights_grad, window_grad, window, 0)
        bias_grad = lax.dynamic_slice_in_dim(biases_grad, window, width) + score_grads.sum(axis=0)
        return hidden_grad, weights_grad, lax.dynamic_update_slice_in_dim(biases_grad, bias_grad, window, 0)

    zeros = (jnp.zeros_like(hidden), jnp.zeros_like(weights), jnp.zeros_like(biases))
    hidden_grad, weights_grad, biases_grad = _walk(plan, class_of, add_step, zeros)
    return hidden_grad, (weights_grad, biases_grad), None, None


_losses.defvjp(_losses_fwd, _losses_bwd)


def _step_scores(hidden: Array, params: WordParams, targets: Array, step: Step) -> tuple[Array, Array, Array]:
    """The step's rows scored over its window: [R, W] scores (−inf outside the class), [R]
    target columns in the window, [R] log-normalizers over the class."""
    weights, biases = params
    window_weights = lax.dynamic_slice_in_dim(weights, step.window, step.width)
    window_biases = lax.dynamic_slice_in_dim(biases, step.window, step.width)
    columns = jnp.arange(step.width, dtype=jnp.int32)
    in_class = (columns >= step.first) & (columns < step.first + step.size)
    scores = jnp.where(in_class, hidden[step.picked] @ window_weights.T + window_biases, -jnp.inf)
    target_columns = jnp.clip(targets[step.picked] - step.window, 0, step.width - 1)
    return scores, target_columns, jax.nn.logsumexp(scores, axis=1)


def _num_classes(tiers: tuple[Tier, ...]) -> int:
    return int(max(tier.classes.max() for tier in tiers)) + 1


def _walk(plan: Plan, class_of: Array, add_step: Callable[[Carry, Step], Carry], init: Carry) -> Carry:
    """`init` updated by `add_step` for every step of `plan.step_rows` rows of every class: each
    tier's step slots (loops of known trip count), then each tier's steps beyond its slots (loops
    whose trip counts depend on the data, none where the batch fits)."""
    counts = jnp.zeros((_num_classes(plan.tiers),), jnp.int32).at[class_of].add(1)
    order = jnp.argsort(class_of, stable=True).astype(jnp.int32)
    # Padded so that a step's slice past the last row is never shifted back to fit.
    order = jnp.concatenate([order, jnp.zeros((plan.step_rows,), jnp.int32)])
    offsets = jnp.cumsum(counts) - counts
    walks = [_TierWalk(tier, counts, offsets, order, plan.step_rows, add_step) for tier in plan.tiers]
    carry = init
    for index, (walk, capacity) in enumerate(zip(walks, plan.capacities)):
        with jax.named_scope(f"{TIER_SCOPE}{index}"):
            carry = lax.fori_loop(0, capacity, walk.step, carry)
    for index, (walk, capacity) in enumerate(zip(walks, plan.capacities)):
        with jax.named_scope(f"{TIER_SCOPE}{index}"):
            carry = lax.fori_loop(capacity, walk.ends[-1], walk.step, carry)
    return carry


class _TierWalk:
    """One tier's steps over the batch's rows sorted by class: its classes take ceil(count / R)
    steps each, numbered from 0 in class order.

    counts: [C] int32 rows of each class; offsets: [C] int32 where each class's rows start in
    order: [N + R] int32 rows sorted by class, padded by a step; ends: [K] int32 the number after
    each of the tier's classes' last step."""

    def __init__(
        self, tier: Tier, counts: Array, offsets: Array, order: Array, step_rows: int, add_step: Callable
    ) -> None:
        self.tier, self.counts, self.offsets, self.order = tier, counts, offsets, order
        self.step_rows, self.add_step = step_rows, add_step
        self.classes = jnp.asarray(tier.classes)
        self.steps_of = (counts[self.classes] + step_rows - 1) // step_rows
        self.ends = jnp.cumsum(self.steps_of)

    def step(self, number: Array, carry: Carry) -> Carry:
        """`carry` updated by step `number`: rows of the class whose steps hold it; a number past
        the tier's steps falls past its last class's rows, all padding."""
        index = jnp.minimum((self.ends <= number).sum(), self.ends.size - 1)
        start = (number - self.ends[index] + self.steps_of[index]) * self.step_rows
        class_id = self.classes[index]
        picked = lax.dynamic_slice_in_dim(self.order, self.offsets[class_id] + start, self.step_rows)
        valid = start + jnp.arange(self.step_rows, dtype=jnp.int32) < self.counts[class_id]
        window, first, size = (
            jnp.asarray(a)[index] for a in (self.tier.window_starts, self.tier.shifts, self.tier.sizes)
        )
        result: Carry = self.add_step(carry, Step(picked, valid, window, self.tier.width, first, size))
        return result
