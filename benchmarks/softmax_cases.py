"""The cases the softmax benchmark (softmax.py) times: every seqjax head, the row-gradient
sampling and tree losses, JAX baselines and torch, each built as a compiled blocking call
with the memory XLA reports for it."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from types import ModuleType
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.stages import Wrapped

from seqjax.config import HeadConfig
from seqjax.heads import (
    AdaptiveOptions,
    FullOptions,
    TreeOptions,
    adaptive_softmax_loss,
    balanced_tree,
    build_head,
    huffman_tree,
    nce_loss,
    negative_sampling_loss,
    sampled_softmax_loss,
    samplers,
    tail_capacities,
    tail_dimensions,
)
from seqjax.heads.full import DEFAULT_CHUNK, default_block_residuals
from seqjax.heads.rows import read_rows
from seqjax.heads.tree import Tree
from seqjax.heads.tree_rows import deep_capacity, deep_steps, split_path_loss, split_paths, top_size


@dataclasses.dataclass(frozen=True)
class Shapes:
    rows: int  # N
    features: int  # D
    samples: int  # K

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """--rows, --features and --samples, defaulting to the GPU benchmark's shapes."""
        parser.add_argument("--rows", type=int, default=16384)
        parser.add_argument("--features", type=int, default=1024)
        parser.add_argument("--samples", type=int, default=1024)

    @classmethod
    def parsed(cls, args: argparse.Namespace) -> Shapes:
        return cls(args.rows, args.features, args.samples)


# A compiled case: (blocking call, temporaries + arguments + outputs bytes, temporaries bytes).
Compiled = tuple[Callable[[], object], int, int]
# Any case: a compiled one, a torch one (call, None, None), or a torch one too big for the memory
# limit (None, estimated bytes, None).
Case = tuple[Callable[[], object] | None, int | None, int | None]
CaseBuilder = Callable[[], Case]

RECOMPUTING = "full, recomputing blocks"
BFLOAT16_BLOCKS = "full, bfloat16 blocks"


def head_configs(vocab_size: int, shapes: Shapes) -> dict[str, HeadConfig]:
    """The heads benchmarked at one V; adaptive cutoffs at 2% and 20% of V (2k/20k at 100k)."""
    blocks = min(DEFAULT_CHUNK, vocab_size)
    kept = default_block_residuals(shapes.rows, vocab_size)
    return {
        "full": HeadConfig(kind="full"),  # the formulation the head picks for the shapes (float32 inputs)
        "full, materialized": HeadConfig(kind="full", groups=(FullOptions(chunk_size=vocab_size),)),
        # The memory-lean blocked loss, where the default keeps each block's exponentials instead.
        **(
            {
                RECOMPUTING: HeadConfig(
                    kind="full", groups=(FullOptions(chunk_size=blocks, block_residuals="recompute"),)
                )
            }
            if kept != "recompute"
            else {}
        ),
        # Half the kept memory, where the default keeps float32 exponentials: what a bfloat16 run keeps.
        **(
            {
                BFLOAT16_BLOCKS: HeadConfig(
                    kind="full", groups=(FullOptions(chunk_size=blocks, block_residuals="bfloat16"),)
                )
            }
            if kept == "float32"
            else {}
        ),
        "sampled (log-uniform)": HeadConfig(kind="sampled", proposal="log_uniform", num_samples=shapes.samples),
        "NCE (log-uniform)": HeadConfig(kind="nce", proposal="log_uniform", num_samples=shapes.samples),
        "negative (unigram^0.75)": HeadConfig(
            kind="negative", proposal="unigram", power=0.75, num_samples=shapes.samples
        ),
        "class (sqrt V classes)": HeadConfig(kind="class"),
        "tree, balanced": HeadConfig(kind="tree", groups=(TreeOptions(tree="balanced"),)),
        "tree, Huffman": HeadConfig(kind="tree", groups=(TreeOptions(tree="huffman"),)),
        "adaptive (div 4)": HeadConfig(
            kind="adaptive", groups=(AdaptiveOptions(cutoffs=adaptive_cutoffs(vocab_size), div_value=4.0),)
        ),
    }


def adaptive_cutoffs(vocab_size: int) -> tuple[int, ...]:
    return (round(0.02 * vocab_size), round(0.2 * vocab_size))


def zipf_counts(vocab_size: int) -> np.ndarray:
    """Frequency-sorted unigram counts ∝ 1 / rank, the shape of natural-language vocabularies."""
    return np.maximum(1, np.round(1e9 / np.arange(1, vocab_size + 1))).astype(np.int64)


def make_inputs(vocab_size: int, shapes: Shapes, seed: int = 0) -> tuple[np.ndarray, jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    counts = zipf_counts(vocab_size)
    targets = rng.choice(vocab_size, size=shapes.rows, p=counts / counts.sum()).astype(np.int32)
    hidden = rng.normal(size=(shapes.rows, shapes.features)).astype(np.float32)
    return counts, jnp.asarray(hidden), jnp.asarray(targets)


def jax_case(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, hidden: jax.Array, targets: jax.Array) -> Compiled:
    """A compiled value_and_grad of the head's loss, its arguments, and its memory in bytes."""
    head = build_head(cfg, vocab_size, counts)
    key = jax.random.key(0)
    init = jax.eval_shape(lambda k: head.init({"params": k}, hidden, targets, k, None, None, method="loss"), key)
    shapes = nn.meta.unbox(init)["params"]
    leaves, treedef = jax.tree.flatten(shapes)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    params = jax.tree.unflatten(
        treedef,
        [0.05 * jax.random.normal(k, leaf.shape, leaf.dtype) for k, leaf in zip(keys, leaves)],
    )

    def loss(
        params: Any, hidden: jax.Array, targets: jax.Array, key: jax.Array
    ) -> jax.Array:  # targets traced, as in a train step
        value: jax.Array = head.apply({"params": params}, hidden, targets, key, None, None, method="loss")[0]
        return value

    return compiled(jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), params, hidden, targets, key)


ROW_GRADIENT_LOSSES = {
    "sampled (log-uniform), row gradients": ("log_uniform", True, "sampled"),
    "NCE (log-uniform), row gradients": ("log_uniform", True, "nce"),
    "negative (unigram^0.75), row gradients": ("unigram", False, "negative"),
}


def row_gradient_case(
    name: str, vocab_size: int, shapes: Shapes, counts: np.ndarray, hidden: jax.Array, targets: jax.Array
) -> Compiled:
    """A sampling loss differentiated with respect to the rows it reads (`seqjax.heads.rows`):
    draw K samples, gather the targets' and the samples' rows (`read_rows`), and return the loss
    with the gradients of the hidden states and of the [N, D] and [K, D] rows, repeats included —
    what TensorFlow's IndexedSlices gradient holds — instead of a dense [V, D] table gradient."""
    proposal, unique, kind = ROW_GRADIENT_LOSSES[name]
    sampler = samplers.log_uniform(vocab_size) if proposal == "log_uniform" else samplers.unigram(counts, 0.75)
    rng = np.random.default_rng(2)
    weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab_size,), jnp.float32)

    def step(
        weights: jax.Array, biases: jax.Array, hidden: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array], jax.Array]:
        drawn = sampler.sample(key, shapes.samples, unique=unique)
        target_log_counts = sampler.log_expected_count(targets, shapes.samples, unique=unique)
        rows, row_biases = read_rows(weights, biases, targets, drawn.ids)

        def loss(hidden: jax.Array, rows: jax.Array, row_biases: jax.Array) -> jax.Array:
            args = (hidden, rows, row_biases, targets, drawn.ids)
            if kind == "negative":
                return negative_sampling_loss(*args, gathered=True).mean()
            loss_fn = sampled_softmax_loss if kind == "sampled" else nce_loss
            return loss_fn(*args, drawn.log_expected_counts, target_log_counts, gathered=True).mean()

        value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2))(hidden, rows, row_biases)
        return value, grads, drawn.ids

    return compiled(jax.jit(step), weights, biases, hidden, jax.random.key(0))


HUFFMAN_ROWS = "tree, Huffman, row gradients"
TREE_ROW_GRADIENTS = {HUFFMAN_ROWS: "huffman", "tree, balanced, row gradients": "balanced"}
# Tree levels scored densely by the row-gradient cases: the fastest whole Huffman step at V = 100k
# of k = 5..9 (26.7, 22.3, 22.9, 27.1, 32.6 ms; medians of 15, 2-core Intel Xeon, huge pages), k = 6
# and 7 within noise of each other. Fewer levels gather more deep steps, more levels widen the top.
TOP_LEVELS = 7


def tree_problem(
    name: str, vocab_size: int, shapes: Shapes, counts: np.ndarray, targets: jax.Array
) -> tuple[Tree, jax.Array, jax.Array, int, int]:
    """The tree of case `name`, its node weights [V - 1, D] and biases [V - 1] float32, the
    nodes of its dense top (`top_size`) and the deep steps' capacity for `targets`."""
    tree = huffman_tree(counts) if TREE_ROW_GRADIENTS[name] == "huffman" else balanced_tree(vocab_size)
    rng = np.random.default_rng(2)
    weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size - 1, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab_size - 1,), jnp.float32)
    return tree, weights, biases, top_size(tree, TOP_LEVELS), deep_capacity(tree, np.asarray(targets), TOP_LEVELS)


def tree_row_gradient_case(
    name: str,
    vocab_size: int,
    shapes: Shapes,
    counts: np.ndarray,
    hidden: jax.Array,
    targets: jax.Array,
) -> Compiled:
    """A tree loss with row gradients (`seqjax.heads.tree_rows`): the top TOP_LEVELS levels
    scored by one dense product (their [T, D] gradient dense), the deeper steps on gathered node
    rows (one gradient row per step); the step capacity is chosen on the host from the targets,
    as a training loop would per batch."""
    tree, weights, biases, size, capacity = tree_problem(name, vocab_size, shapes, counts, targets)

    def step(
        weights: jax.Array, biases: jax.Array, hidden: jax.Array, targets: jax.Array
    ) -> tuple[jax.Array, tuple[jax.Array, ...], jax.Array]:
        paths = split_paths(tree, targets, TOP_LEVELS, capacity)

        def loss(
            hidden: jax.Array, top: jax.Array, top_biases: jax.Array, deep: jax.Array, deep_biases: jax.Array
        ) -> jax.Array:
            return split_path_loss(hidden, top, top_biases, deep, deep_biases, paths).mean()

        deep = paths.step_nodes
        args = (hidden, weights[:size], biases[:size], weights[deep], biases[deep])
        value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))(*args)
        return value, grads, deep

    return compiled(jax.jit(step), weights, biases, hidden, targets)


def deep_path_lengths(name: str, vocab_size: int, counts: np.ndarray, targets: jax.Array) -> tuple[float, int]:
    """Mean and max number of path steps below depth TOP_LEVELS over the targets."""
    tree = tree_problem(name, vocab_size, Shapes(1, 1, 1), counts, targets)[0]
    steps = deep_steps(tree, np.asarray(targets), TOP_LEVELS)
    return float(steps.mean()), int(steps.max())


ADAPTIVE_CAPACITIES = "adaptive (div 4), tail capacities"


def adaptive_capacity_case(vocab_size: int, shapes: Shapes, hidden: jax.Array, targets: jax.Array) -> Compiled:
    """`adaptive_softmax_loss` with `tail_capacities` chosen on the host from the targets (as a
    training loop would per batch): each tail gathers its rows and keeps their activations."""
    cutoffs, features = adaptive_cutoffs(vocab_size), shapes.features
    bounds = cutoffs + (vocab_size,)
    widths = tail_dimensions(features, len(cutoffs), 4.0)
    rng = np.random.default_rng(2)

    def normal(*shape: int) -> jax.Array:
        return jnp.asarray(0.05 * rng.normal(size=shape), jnp.float32)

    params = (
        normal(cutoffs[0] + len(cutoffs), features),
        [normal(features, width) for width in widths],
        [normal(bounds[i + 1] - bounds[i], width) for i, width in enumerate(widths)],
    )
    capacities = tail_capacities(np.asarray(targets), cutoffs)

    def loss(hidden: jax.Array, params: tuple[jax.Array, list[jax.Array], list[jax.Array]]) -> jax.Array:
        head, projections, tails = params
        return adaptive_softmax_loss(
            hidden, head, projections, tails, targets, cutoffs, tail_capacities=capacities
        ).mean()

    return compiled(jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), hidden, params)


def baseline_cases(
    vocab_size: int, shapes: Shapes, hidden: jax.Array, targets: jax.Array
) -> dict[str, Callable[[], Compiled]]:
    """JAX references beside the heads, as {name: builder}: optax's plain cross-entropy on
    materialized logits, and the floor every table gradient pays: one dense [V, D] gradient
    built from K + N rows."""
    import optax

    def optax_case() -> Compiled:
        rng = np.random.default_rng(2)
        weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size, shapes.features)), jnp.float32)
        biases = jnp.zeros((vocab_size,), jnp.float32)

        def loss(weights: jax.Array, biases: jax.Array, hidden: jax.Array) -> jax.Array:
            logits = hidden @ weights.T + biases
            losses: jax.Array = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
            return losses.mean()

        return compiled(jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))), weights, biases, hidden)

    def floor_case() -> Compiled:
        ids = jnp.asarray(np.random.default_rng(3).integers(0, vocab_size, shapes.samples + shapes.rows), jnp.int32)
        rows = jnp.ones((ids.shape[0], shapes.features), jnp.float32)
        table = jax.ShapeDtypeStruct((vocab_size, shapes.features), jnp.float32)
        return compiled(jax.jit(lambda ids, rows: jnp.zeros(table.shape, table.dtype).at[ids].add(rows)), ids, rows)

    return {"optax cross-entropy": optax_case, "dense [V, D] gradient floor": floor_case}


def compiled(jitted: Wrapped, *args: Any) -> Compiled:
    """(blocking call, temporaries + arguments + outputs bytes, temporaries bytes)."""
    executable = jitted.lower(*args).compile()
    memory = executable.memory_analysis()
    if memory is None:
        raise ValueError(f"the {jax.default_backend()} backend reports no memory analysis; the cases need one")
    total = memory.temp_size_in_bytes + memory.argument_size_in_bytes + memory.output_size_in_bytes
    return (lambda: jax.block_until_ready(executable(*args))), total, memory.temp_size_in_bytes


def torch_cases(
    torch: ModuleType, vocab_size: int, hidden: jax.Array, targets: jax.Array, memory_limit: float
) -> dict[str, CaseBuilder]:
    """`F.cross_entropy` of h W^T + b and `AdaptiveLogSoftmaxWithLoss`, forward + backward, as
    {name: builder}; a builder returns (None, estimated bytes, None) when the estimate of its
    float32 tensors (parameters, gradients, logits and their gradients) exceeds the limit."""
    nn = torch.nn
    rows, features = hidden.shape
    cutoffs = adaptive_cutoffs(vocab_size)
    bounds = (0,) + cutoffs + (vocab_size,)
    per_cluster = np.bincount(np.searchsorted(np.array(cutoffs), np.asarray(targets), side="right"))
    tail_logits = sum(int(n) * (bounds[i + 1] - bounds[i]) for i, n in enumerate(per_cluster) if i > 0)
    estimates = {
        "full": 4 * (3 * rows * vocab_size + 3 * vocab_size * features),
        "adaptive": 4 * (3 * vocab_size * features + 3 * rows * (cutoffs[0] + len(cutoffs)) + 3 * tail_logits),
    }

    def inputs() -> tuple[Any, Any]:  # (hidden, targets) torch tensors
        h = torch.tensor(np.asarray(hidden), requires_grad=True)
        return h, torch.tensor(np.asarray(targets), dtype=torch.long)

    def full_case() -> Case:
        if estimates["full"] > memory_limit:
            return None, estimates["full"], None
        h, t = inputs()
        weights = (0.05 * torch.randn(vocab_size, features)).requires_grad_()
        biases = torch.zeros(vocab_size, requires_grad=True)

        def step() -> None:
            h.grad = weights.grad = biases.grad = None
            nn.functional.cross_entropy(h @ weights.T + biases, t).backward()

        return step, None, None

    def adaptive_case() -> Case:
        if estimates["adaptive"] > memory_limit:
            return None, estimates["adaptive"], None
        h, t = inputs()
        adaptive = nn.AdaptiveLogSoftmaxWithLoss(features, vocab_size, list(cutoffs), div_value=4.0)

        def step() -> None:
            h.grad = None
            adaptive.zero_grad(set_to_none=True)
            adaptive(h, t).loss.backward()

        return step, None, None

    return {"torch F.cross_entropy": full_case, "torch AdaptiveLogSoftmaxWithLoss": adaptive_case}
