"""The floors of the softmax benchmark (softmax.py): for each target, the work it cannot do
without, timed as a case beside it (matmul products and their gradients, gathers, an exponential
per score), and the matmul that measures the peak."""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from seqjax.heads import tail_capacities, tail_dimensions
from seqjax.heads.adaptive_tails import TAIL_CHUNK
from seqjax.heads.full import default_chunk_size, dividing_block
from seqjax.heads.tree_rows import SplitPaths, split_paths

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_cases import (  # noqa: E402
    HUFFMAN_ROWS,
    TOP_LEVELS,
    Compiled,
    Shapes,
    adaptive_cutoffs,
    compiled,
    tree_problem,
)


def peak_case(size: int) -> Compiled:
    """The [size, size] x [size, size] float32 matmul that measures the peak, as a case: timed
    round-robin with the full softmax, so that its share of the peak reads both in the same load."""
    square = jnp.asarray(np.random.default_rng(5).normal(size=(size, size)), jnp.float32)
    return compiled(jax.jit(lambda a: a @ a), square)


def product_and_vjp(
    x: jax.Array, table: jax.Array, cotangent: jax.Array
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """x · tableᵀ and both its input gradients, laid out as autodiff lays out a loss's products."""
    out, vjp = jax.vjp(lambda x, table: x @ table.T, x, table)
    return out, vjp(cotangent)


def sampled_floor_case(shapes: Shapes, hidden: jax.Array) -> Compiled:
    """The sampling losses' irreducible work at any V: the three [N, D] x [D, K] products
    (scores, hidden gradient, sample rows' gradient) alone."""
    rng = np.random.default_rng(4)
    rows = jnp.asarray(0.05 * rng.normal(size=(shapes.samples, shapes.features)), jnp.float32)
    cotangent = jnp.asarray(rng.normal(size=(shapes.rows, shapes.samples)), jnp.float32)
    return compiled(jax.jit(product_and_vjp), hidden, rows, cotangent)


def full_floor_case(vocab_size: int, shapes: Shapes, hidden: jax.Array, exponentials: bool) -> Compiled:
    """The full softmax's irreducible work: its three products, [N, D] x [D, V] and the two of the
    backward pass, in the head's blocks (`dividing_block` of `default_chunk_size`); with `exponentials`, also
    the one elementwise pass any exact softmax makes over its logits (an exponential and a row
    sum per logit, the backward products reading the exponentials), nothing kept between blocks."""
    weights = jnp.asarray(0.05 * np.random.default_rng(2).normal(size=(vocab_size, shapes.features)), jnp.float32)
    block = dividing_block(vocab_size, default_chunk_size(shapes.rows, vocab_size))  # the head's blocks
    return compiled(jax.jit(lambda h, w: blocked_products(h, w, block, exponentials)), hidden, weights)


def huffman_floor_case(
    vocab_size: int, shapes: Shapes, counts: np.ndarray, hidden: jax.Array, targets: jax.Array
) -> Compiled:
    """What `tree_row_gradient_case` cannot do without on the Huffman tree: the dense top's three
    [N, D] x [D, T] products, and gathering the deep steps' node rows and hidden rows (no loss,
    no gradient)."""
    tree, weights, _, size, capacity = tree_problem(HUFFMAN_ROWS, vocab_size, shapes, counts, targets)
    paths = jax.jit(lambda t: split_paths(tree, t, TOP_LEVELS, capacity))(targets)
    cotangent = jnp.asarray(np.random.default_rng(4).normal(size=(shapes.rows, size)), jnp.float32)

    def floor(
        weights: jax.Array, hidden: jax.Array, paths: SplitPaths, cotangent: jax.Array
    ) -> tuple[tuple[jax.Array, tuple[jax.Array, jax.Array]], jax.Array, jax.Array]:
        products = product_and_vjp(hidden, weights[:size], cotangent)
        return products, weights[paths.step_nodes], hidden[paths.step_rows]

    return compiled(jax.jit(floor), weights, hidden, paths, cotangent)


def blocked_products(
    x: jax.Array, table: jax.Array, block: int, exponentials: bool = False
) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
    """x [R, d] against table [W, d] in blocks of `block` rows of the table (W padded to whole
    blocks): each block's scores x · tableᵀ and the two products of its backward pass, reading
    the scores themselves, or with `exponentials` their exponentials (and their row sums, so
    that they are made): the softmax's least elementwise work, no maxima, nothing kept."""
    starts = jnp.arange(-(-table.shape[0] // block), dtype=jnp.int32) * block
    table = jnp.pad(table, ((0, len(starts) * block - table.shape[0]), (0, 0)))

    def step(carry: tuple[jax.Array, jax.Array], start: jax.Array) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        x_grad, sums = carry
        block_table = lax.dynamic_slice_in_dim(table, start, block)
        scores = x @ block_table.T
        if exponentials:
            scores = jnp.exp(scores)
            sums = sums + scores.sum(axis=1)
        return (x_grad + scores @ block_table, sums), scores.T @ x

    return lax.scan(step, (jnp.zeros_like(x), jnp.zeros(x.shape[0], x.dtype)), starts)


def adaptive_floor_case(vocab_size: int, shapes: Shapes, hidden: jax.Array, targets: jax.Array) -> Compiled:
    """What `adaptive_capacity_case` cannot do without: the head's three [N, D] x [D, c_1 + n]
    products, and for each tail its gathered rows' three projection products and its three
    products with the tail's words, in the loss's blocks of TAIL_CHUNK words, with an
    exponential and a row sum per score (`blocked_products`)."""
    cutoffs, features = adaptive_cutoffs(vocab_size), shapes.features
    bounds = cutoffs + (vocab_size,)
    widths = tail_dimensions(features, len(cutoffs), 4.0)
    rng = np.random.default_rng(2)
    head = jnp.asarray(0.05 * rng.normal(size=(cutoffs[0] + len(cutoffs), features)), jnp.float32)
    projections = [jnp.asarray(0.05 * rng.normal(size=(features, w)), jnp.float32) for w in widths]
    tails = [
        jnp.asarray(0.05 * rng.normal(size=(bounds[i + 1] - bounds[i], w)), jnp.float32) for i, w in enumerate(widths)
    ]
    cluster = np.searchsorted(np.asarray(cutoffs), np.asarray(targets), side="right")
    capacities = tail_capacities(np.asarray(targets), cutoffs)
    rows = [jnp.asarray(np.resize(np.nonzero(cluster == i + 1)[0], c)) for i, c in enumerate(capacities)]

    def floor(
        hidden: jax.Array, head: jax.Array, projections: list[jax.Array], tails: list[jax.Array]
    ) -> list[jax.Array]:
        scores = jnp.exp(hidden @ head.T)
        parts = [scores.sum(axis=1), scores @ head, scores.T @ hidden]
        for picked, projection, tail in zip(rows, projections, tails):
            picked_hidden = hidden[picked]
            projected = picked_hidden @ projection
            (projected_grad, sums), tail_grad = blocked_products(projected, tail, TAIL_CHUNK, exponentials=True)
            parts += [sums, projected_grad @ projection.T, picked_hidden.T @ projected_grad, tail_grad]
        return parts

    return compiled(jax.jit(floor), hidden, head, projections, tails)
