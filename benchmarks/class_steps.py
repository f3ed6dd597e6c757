"""The class head's walk: rows per step fixed at 8 against `rows_per_step` (N / C rounded up).

The within-class term (`seqjax.heads.class_blocks.within_class_losses`) walks the classes one
step after another, each step a matmul of one class's rows with the class's words. With 8 rows
a step the walk takes about N / 8 + C steps; with about the N / C rows each of C equal-mass
classes expects, between C and 2C. Where a step is too small to fill the device, as on a GPU,
the number of steps sets the time (benchmarks/results/softmax_gpu.md: 159 ms for the class head
at N = 16,384, V = 100,000, against 72 ms for the full softmax, when each step was also a trip
of a loop per class whose trip count depended on the data). Each tier of class sizes walks its
step slots (`slot_capacities`), or its steps where a batch has more.

For each shape: the steps each walk takes for the same Zipfian targets (exact, counted on the
host), and on this machine the median time of one jitted value_and_grad of the within-class
losses with respect to the hidden states, the word table and the biases, both step sizes timed
round-robin in one process. The numbers agree between the two (checked before timing).

Usage: python benchmarks/class_steps.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.heads import frequency_classes
from seqjax.heads.class_blocks import (
    MIN_ROWS_PER_STEP,
    rows_per_step,
    slot_capacities,
    tiers_of,
    within_class_losses,
)
from seqjax.heads.classes import Classes, _tier_of_class

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import interleaved, markdown_table, publish  # noqa: E402
from softmax_cases import zipf_counts  # noqa: E402

# (N rows, V words, D features): the CPU softmax benchmark's rows, then more rows per class.
SHAPES = [(512, 10_000, 256), (4096, 32_768, 256), (16_384, 32_768, 256)]
QUICK_SHAPES = [(2048, 4096, 64)]
# The GPU benchmark's shape (benchmarks/softmax_gpu.py), counted only: it needs a GPU to time.
GPU_SHAPE = (16_384, 100_000, 1024)


def zipf_targets(vocab_size: int, rows: int, seed: int = 0) -> np.ndarray:
    counts = zipf_counts(vocab_size)
    return np.random.default_rng(seed).choice(vocab_size, size=rows, p=counts / counts.sum()).astype(np.int32)


def walk_steps(classes: Classes, targets: np.ndarray, step_rows: int) -> int:
    """The steps one walk over `targets` takes: one per `step_rows` rows of each class, and per
    tier of class sizes at least its step slots."""
    steps = -(-np.bincount(classes.class_of[targets], minlength=classes.num_classes) // step_rows)
    tiers = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes), classes.shares)
    capacities = slot_capacities(tiers, targets.size, step_rows)
    return sum(max(int(steps[tier.classes].sum()), capacity) for tier, capacity in zip(tiers, capacities))


def timed_case(classes: Classes, targets: np.ndarray, features: int) -> dict[int, Callable[[], object]]:
    """A jitted value_and_grad of the within-class losses for each step size, checked to agree."""
    rng = np.random.default_rng(1)
    hidden = jnp.asarray(rng.normal(size=(targets.size, features)), jnp.float32)
    weights = jnp.asarray(0.05 * rng.normal(size=(classes.vocab_size, features)), jnp.float32)
    biases = jnp.zeros((classes.vocab_size,), jnp.float32)
    targets_ = jnp.asarray(targets)
    class_of = jnp.asarray(classes.class_of)[targets_]
    tiers = tiers_of(classes.starts, classes.sizes, _tier_of_class(classes), classes.shares)
    calls: dict[int, Callable[[], object]] = {}
    results: list[object] = []
    for step_rows in (MIN_ROWS_PER_STEP, 0):

        def loss(h: jax.Array, w: jax.Array, b: jax.Array, step_rows: int = step_rows) -> jax.Array:
            return within_class_losses(h, w, b, targets_, class_of, tiers, step_rows).mean()

        grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
        results.append(jax.block_until_ready(grad(hidden, weights, biases)))
        calls[step_rows] = functools.partial(lambda g: jax.block_until_ready(g(hidden, weights, biases)), grad)
    for got, want in zip(jax.tree.leaves(results[1]), jax.tree.leaves(results[0])):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small shape, 3 repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    rows = []
    for n, vocab, features in QUICK_SHAPES if args.quick else SHAPES:
        classes = frequency_classes(zipf_counts(vocab), math.ceil(math.sqrt(vocab)))
        targets = zipf_targets(vocab, n)
        chosen = rows_per_step(n, classes.num_classes)
        times = interleaved(timed_case(classes, targets, features), repeats)
        rows.append(
            [
                f"{n:,} x {vocab:,} x {features}",
                f"{classes.num_classes}",
                f"8: {walk_steps(classes, targets, 8):,}",
                f"{chosen}: {walk_steps(classes, targets, chosen):,}",
                f"{times[MIN_ROWS_PER_STEP] * 1e3:.1f} ms",
                f"{times[0] * 1e3:.1f} ms",
                f"{times[MIN_ROWS_PER_STEP] / times[0]:.2f}x",
            ]
        )
        print(rows[-1], flush=True)
    n, vocab, features = GPU_SHAPE
    classes = frequency_classes(zipf_counts(vocab), math.ceil(math.sqrt(vocab)))
    targets = zipf_targets(vocab, n)
    chosen = rows_per_step(n, classes.num_classes)
    rows.append(
        [
            f"{n:,} x {vocab:,} x {features} (GPU benchmark's; not timed here)",
            f"{classes.num_classes}",
            f"8: {walk_steps(classes, targets, 8):,}",
            f"{chosen}: {walk_steps(classes, targets, chosen):,}",
            "",
            "",
            "",
        ]
    )
    header = ["N x V x D", "classes C", "steps, 8 rows", "steps, rows_per_step", "8 rows", "rows_per_step", "speed-up"]
    body = (
        "One jitted value_and_grad of `within_class_losses` (the class head's within-class term) with respect "
        "to the hidden states, the word table and the biases; Zipfian targets, ceil(sqrt V) equal-mass classes; "
        f"the median of {repeats} calls, the two step sizes timed round-robin in one process. Steps: what one "
        "walk takes for these targets (the loss walks once, its gradient once more), counted on the host.\n\n"
        + markdown_table(header, rows)
        + "\n\nWritten by benchmarks/class_steps.py.\n"
    )
    publish("class_steps", args.quick, "The class head's walk: 8 rows a step against rows_per_step", body)


if __name__ == "__main__":
    main()
