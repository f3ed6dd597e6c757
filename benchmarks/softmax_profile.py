"""Where the time of the softmax heads goes, measured part by part beside the whole.

    python benchmarks/softmax_profile.py [--vocab 100000] [--repeats 5]

Three breakdowns at N = 2048 rows, D = 512, targets Zipfian (the shapes of softmax.py), each
part a jitted program timed round-robin with the whole it belongs to:

* full softmax: the head's loss and gradients against the same blocked matmuls without the
  softmax (the three [N, D] x [D, V] products the FLOP count holds, then the recomputed block),
  and the [N, V] exponentials alone: the matmuls' own share of the measured peak bounds what
  any formulation built on XLA's matmuls can reach;
* adaptive softmax: seqjax and torch on each part of the same math (the head over the
  shortlist and the cluster entries for every row; each tail on exactly its rows, projection
  included), then both whole heads;
* Huffman tree with row gradients: the whole step (`seqjax.heads.tree_rows`, the top levels
  dense) against its parts: splitting the paths, the top's three products, gathering the deep
  steps' rows; and the formulation before it, every path step on [N, L, D] gathered rows;
* sampled softmax with row gradients at the smallest and largest V of `--sweep`: the whole
  step against drawing the K samples with their expected counts, gathering the targets' and
  samples' rows from the [V, D] table (`read_rows`), and the loss with its gradients on those
  rows: which part grows with V.

Writes benchmarks/results/softmax_profile.md.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from seqjax.training.core.host_heap import restart_with_huge_pages

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softmax_cases as cases  # noqa: E402
from common import interleaved, machine, markdown_table, matmul_peak, torch_or_none, write_result  # noqa: E402

from seqjax.heads import (  # noqa: E402
    full_softmax_loss,
    huffman_tree,
    sampled_softmax_loss,
    samplers,
    tree_path_loss,
    tree_paths,
)
from seqjax.heads.full import default_chunk_size  # noqa: E402
from seqjax.heads.rows import read_rows  # noqa: E402
from seqjax.heads.tree_rows import deep_capacity, deep_steps, split_paths, top_size  # noqa: E402


def blocking(fn: Callable[..., object], *args: Any) -> Callable[[], object]:
    compiled = jax.jit(fn).lower(*args).compile()
    return lambda: jax.block_until_ready(compiled(*args))


def full_softmax_parts(
    vocab_size: int, shapes: cases.Shapes, hidden: jax.Array, targets: jax.Array
) -> dict[str, tuple[Callable[[], object], float]]:
    rng = np.random.default_rng(2)
    weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab_size,), jnp.float32)
    block = default_chunk_size(shapes.rows, vocab_size)
    starts = jnp.arange(vocab_size // block, dtype=jnp.int32) * block  # whole blocks only: V·block/V of the work

    def head(
        hidden: jax.Array, weights: jax.Array, biases: jax.Array, residuals: str | None = None
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
        def loss(hidden: jax.Array, weights: jax.Array, biases: jax.Array) -> jax.Array:
            return full_softmax_loss(
                hidden, weights, biases, targets, chunk_size=block, block_residuals=residuals
            ).mean()

        return jax.value_and_grad(loss, argnums=(0, 1, 2))(hidden, weights, biases)

    def matmuls(hidden: jax.Array, weights: jax.Array, recompute: bool) -> tuple[jax.Array, jax.Array]:
        def step(hidden_grad: jax.Array, start: jax.Array) -> tuple[jax.Array, jax.Array]:
            block_weights = lax.dynamic_slice_in_dim(weights, start, block)
            logits = hidden @ block_weights.T
            if recompute:  # the backward pass's second product of the same block
                logits = logits + (hidden + 1.0) @ block_weights.T
            return hidden_grad + logits @ block_weights, logits.T @ hidden

        return lax.scan(step, jnp.zeros_like(hidden), starts)

    def exponentials(hidden: jax.Array, weights: jax.Array, count: int) -> jax.Array:
        def step(total: jax.Array, start: jax.Array) -> tuple[jax.Array, None]:
            logits = hidden @ lax.dynamic_slice_in_dim(weights, start, block).T
            return total + sum(jnp.exp(logits - float(k)).sum() for k in range(count)) + logits.sum(), None

        return lax.scan(step, jnp.zeros((), jnp.float32), starts)[0]

    covered = starts.size * block / vocab_size
    parts = {
        "loss + gradients (the head, as the default picks)": (blocking(head, hidden, weights, biases), 1.0),
        "loss + gradients, bfloat16 exponentials kept (a bfloat16 run's default)": (
            blocking(functools.partial(head, residuals="bfloat16"), hidden, weights, biases),
            1.0,
        ),
        "loss + gradients, recomputing each block (4 matmuls)": (
            blocking(functools.partial(head, residuals="recompute"), hidden, weights, biases),
            1.0,
        ),
        "the 3 block matmuls alone (fwd logits, P @ W, P^T @ h)": (
            blocking(lambda h, w: matmuls(h, w, False), hidden, weights),
            covered,
        ),
        "the 4 block matmuls alone (+ the recomputed logits)": (
            blocking(lambda h, w: matmuls(h, w, True), hidden, weights),
            covered,
        ),
        "the block logits alone (one matmul, summed)": (
            blocking(lambda h, w: exponentials(h, w, 0), hidden, weights),
            covered,
        ),
        "the block logits + 2 exponentials of each (fwd and bwd), summed": (
            blocking(lambda h, w: exponentials(h, w, 2), hidden, weights),
            covered,
        ),
    }
    return {name: (fn, scale) for name, (fn, scale) in parts.items()}


def adaptive_parts(
    torch: ModuleType, vocab_size: int, shapes: cases.Shapes, counts: np.ndarray, hidden: jax.Array, targets: jax.Array
) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """{part: (seqjax call, torch call)} for the head, each tail on its own rows, and the whole."""
    cutoffs = cases.adaptive_cutoffs(vocab_size)
    bounds = (0,) + cutoffs + (vocab_size,)
    targets_np = np.asarray(targets)
    cluster = np.searchsorted(np.array(cutoffs), targets_np, side="right")
    rng = np.random.default_rng(3)
    parts: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
    widths = [shapes.features] + [int(shapes.features // 4 ** (i + 1)) for i in range(len(cutoffs))]
    for index in range(len(bounds) - 1):
        if index == 0:
            rows, size = np.arange(shapes.rows), cutoffs[0] + len(cutoffs)
            local = np.where(cluster == 0, targets_np, cutoffs[0] + cluster - 1)
        else:
            rows, size = np.nonzero(cluster == index)[0], bounds[index + 1] - bounds[index]
            local = targets_np[rows] - bounds[index]
        width = widths[index]
        projection = jnp.asarray(rng.normal(size=(shapes.features, width)) / np.sqrt(shapes.features), jnp.float32)
        weights = jnp.asarray(0.05 * rng.normal(size=(size, width)), jnp.float32)
        part_hidden, part_targets = hidden[rows], jnp.asarray(local, jnp.int32)

        def loss(
            h: jax.Array, p: jax.Array, w: jax.Array, part_targets: jax.Array = part_targets, index: int = index
        ) -> jax.Array:
            projected = h if index == 0 else h @ p
            return full_softmax_loss(projected, w, None, part_targets).sum()

        jax_call = blocking(jax.value_and_grad(loss, argnums=(0, 1, 2)), part_hidden, projection, weights)
        torch_call = _torch_part(torch, part_hidden, projection, weights, local, index == 0)
        name = f"head: {shapes.rows} rows x {size:,} entries" if index == 0 else f"tail {index}: {rows.size} rows"
        parts[f"{name}, d = {width}"] = (jax_call, torch_call)
    whole_jax = cases.jax_case(
        cases.head_configs(vocab_size, shapes)["adaptive (div 4)"], vocab_size, counts, hidden, targets
    )[0]
    whole_torch = cases.torch_cases(torch, vocab_size, hidden, targets, float("inf"))[
        "torch AdaptiveLogSoftmaxWithLoss"
    ]()[0]
    assert whole_torch is not None  # no memory limit: the case is always built
    parts["whole head (AdaptiveLogSoftmaxWithLoss / adaptive head)"] = (whole_jax, whole_torch)
    return parts


def _torch_part(
    torch: ModuleType, hidden: jax.Array, projection: jax.Array, weights: jax.Array, targets: np.ndarray, is_head: bool
) -> Callable[[], None]:
    h = torch.tensor(np.asarray(hidden), requires_grad=True)
    p = torch.tensor(np.asarray(projection), requires_grad=True)
    w = torch.tensor(np.asarray(weights), requires_grad=True)
    t = torch.tensor(targets, dtype=torch.long)

    def step() -> None:
        h.grad = p.grad = w.grad = None
        projected = h if is_head else h @ p
        torch.nn.functional.cross_entropy(projected @ w.T, t, reduction="sum").backward()

    return step


def huffman_parts(
    vocab_size: int, shapes: cases.Shapes, counts: np.ndarray, hidden: jax.Array, targets: jax.Array
) -> dict[str, Callable[[], object] | None]:
    tree = huffman_tree(counts)
    rng = np.random.default_rng(2)
    weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size - 1, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab_size - 1,), jnp.float32)
    size, capacity = top_size(tree, cases.TOP_LEVELS), deep_capacity(tree, np.asarray(targets), cases.TOP_LEVELS)
    steps = deep_steps(tree, np.asarray(targets), cases.TOP_LEVELS)
    paths = jax.jit(lambda t: split_paths(tree, t, cases.TOP_LEVELS, capacity))(targets)
    nodes, codes, mask = tree_paths(tree, targets)

    def all_path_rows(
        weights: jax.Array, biases: jax.Array, hidden: jax.Array
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:  # the formulation before the dense top
        def loss(hidden: jax.Array, path_weights: jax.Array, path_biases: jax.Array) -> jax.Array:
            return tree_path_loss(hidden, path_weights, path_biases, codes, mask).mean()

        return jax.value_and_grad(loss, argnums=(0, 1, 2))(hidden, weights[nodes], biases[nodes])

    def top_products(weights: jax.Array, hidden: jax.Array) -> tuple[jax.Array, jax.Array]:
        scores = hidden @ weights[:size].T
        return scores @ weights[:size], scores.T @ hidden

    name = "tree, Huffman, row gradients"
    return {
        f"the whole step (top {cases.TOP_LEVELS} levels dense: split_paths, gathers, loss, row gradients)": (
            cases.tree_row_gradient_case(name, vocab_size, shapes, counts, hidden, targets)[0]
        ),
        "splitting the paths (split_paths)": blocking(
            lambda t: split_paths(tree, t, cases.TOP_LEVELS, capacity), targets
        ),
        f"the top's three [N, D] x [D, T = {size}] products": blocking(top_products, weights, hidden),
        f"gathering the deep steps' node and hidden rows, [M = {capacity}, D] each": blocking(
            lambda w, h, p: (w[p.step_nodes], h[p.step_rows]), weights, hidden, paths
        ),
        f"before: every path step on gathered rows, [N, L, D] = [{shapes.rows}, {nodes.shape[1]}, "
        f"{shapes.features}]": blocking(all_path_rows, weights, biases, hidden),
        f"path steps below the top {cases.TOP_LEVELS} levels: mean {steps.mean():.2f}, max {steps.max()} "
        f"(whole paths: mean {tree.depths[np.asarray(targets)].mean():.1f} of L = {nodes.shape[1]})": None,
    }


def sampled_row_parts(vocab_size: int, shapes: cases.Shapes) -> dict[str, Callable[[], object]]:
    """{part: call} of the log-uniform sampled softmax step with row gradients at V."""
    counts, hidden, targets = cases.make_inputs(vocab_size, shapes)
    sampler = samplers.log_uniform(vocab_size)
    rng = np.random.default_rng(2)
    weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab_size,), jnp.float32)
    key = jax.random.key(0)

    def draw(key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        drawn = sampler.sample(key, shapes.samples, unique=True)
        return drawn.ids, drawn.log_expected_counts, sampler.log_expected_count(targets, shapes.samples, unique=True)

    ids, sample_counts, target_counts = jax.jit(draw)(key)
    rows, row_biases = read_rows(weights, biases, targets, ids)

    def loss(h: jax.Array, w: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
        def mean_loss(h: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
            return sampled_softmax_loss(h, w, b, targets, ids, sample_counts, target_counts, gathered=True).mean()

        return jax.value_and_grad(mean_loss, argnums=(0, 1, 2))(h, w, b)

    whole = cases.row_gradient_case(
        "sampled (log-uniform), row gradients", vocab_size, shapes, counts, hidden, targets
    )[0]
    return {
        "the whole step": whole,
        "drawing K unique samples and both expected counts": blocking(draw, key),
        "gathering the targets' and samples' rows from the [V, D] table": blocking(
            lambda w, b, i: read_rows(w, b, targets, i), weights, biases, ids
        ),
        "the loss and its gradients on the gathered rows": blocking(loss, hidden, rows, row_biases),
    }


def main(argv: list[str] | None = None) -> None:
    restart_with_huge_pages()  # as softmax.py: the host heap a `seqjax` process has
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep", default="10000,1000000", help="the two V of the sampled row-gradient breakdown")
    args = parser.parse_args(argv)
    shapes, vocab_size = cases.Shapes(2048, 512, 1024), args.vocab
    info = machine()
    print("machine:", "; ".join(f"{k} {v}" for k, v in info.items()))
    peak = matmul_peak()
    counts, hidden, targets = cases.make_inputs(vocab_size, shapes)
    flops = 6.0 * shapes.rows * shapes.features * vocab_size
    sections = [
        f"Measured fp32 matmul peak (JAX, 2048^3): {peak:.0f} GFLOP/s. V = {vocab_size:,}, N = {shapes.rows}, "
        f"D = {shapes.features}; median of {args.repeats} calls timed round-robin within each table."
    ]

    parts = full_softmax_parts(vocab_size, shapes, hidden, targets)
    seconds = interleaved({name: fn for name, (fn, _) in parts.items()}, args.repeats, warm_up=True)
    rows = []
    for name, (_, covered) in parts.items():
        scaled = seconds[name] / covered  # blocks covering less than V scaled to the whole vocabulary
        rows.append([name, f"{scaled * 1e3:,.1f} ms", f"{flops / scaled / 1e9 / peak:.0%}"])
    sections.append("### Full softmax\n\n" + markdown_table(["part", "time", "6·N·D·V FLOPs / time, % of peak"], rows))

    torch = torch_or_none()
    if torch is not None:
        pairs = adaptive_parts(torch, vocab_size, shapes, counts, hidden, targets)
        calls: dict[tuple[str, str], Callable[[], object]] = {}
        for name, (jax_call, torch_call) in pairs.items():
            calls[("seqjax", name)], calls[("torch", name)] = jax_call, torch_call
        pair_seconds = interleaved(calls, args.repeats, warm_up=True)
        rows = []
        for name in pairs:
            ours, theirs = pair_seconds[("seqjax", name)], pair_seconds[("torch", name)]
            rows.append([name, f"{ours * 1e3:,.1f} ms", f"{theirs * 1e3:,.1f} ms", f"{theirs / ours:.2f}x"])
        sections.append(
            f"### Adaptive softmax (cutoffs {cases.adaptive_cutoffs(vocab_size)}, div 4)\n\n"
            + markdown_table(["part (fwd + bwd)", "seqjax", "torch", "torch time / seqjax time"], rows)
        )

    huffman = huffman_parts(vocab_size, shapes, counts, hidden, targets)
    timed = {name: fn for name, fn in huffman.items() if fn is not None}
    seconds = interleaved(timed, args.repeats, warm_up=True)
    rows = [[name, f"{seconds[name] * 1e3:,.1f} ms" if name in seconds else ""] for name in huffman]
    sections.append("### Huffman tree, row gradients\n\n" + markdown_table(["part", "time"], rows))

    low, high = (int(v) for v in args.sweep.split(","))
    per_v = {v: sampled_row_parts(v, shapes) for v in (low, high)}
    sweep = {(v, name): fn for v, parts in per_v.items() for name, fn in parts.items()}
    sweep_seconds = interleaved(sweep, args.repeats, warm_up=True)
    rows = [
        [
            name,
            f"{sweep_seconds[(low, name)] * 1e3:,.2f} ms",
            f"{sweep_seconds[(high, name)] * 1e3:,.2f} ms",
            f"{np.log(sweep_seconds[(high, name)] / sweep_seconds[(low, name)]) / np.log(high / low):.2f}",
        ]
        for name in per_v[low]
    ]
    sections.append(
        "### Sampled softmax (log-uniform, unique), row gradients, against V\n\n"
        + markdown_table(["part", f"V = {low:,}", f"V = {high:,}", "log-log slope"], rows)
    )

    body = "\n\n".join(sections)
    print(body)
    print("wrote", write_result("softmax_profile", "Softmax heads: where the time goes", body))


if __name__ == "__main__":
    main()
