"""Forward+backward time and peak memory of every softmax head, against the full softmax and torch.

    python benchmarks/softmax.py [--quick] [--vocab 10000,100000,1000000] [--repeats 5]

For each vocabulary size V, every head of `seqjax.heads` (built by `build_head`, parameters
random) runs one jitted `value_and_grad` of its training loss with respect to the hidden
states and all of its parameters (dense gradients, as an optimizer update needs them), on
N hidden rows of width D with targets drawn from a Zipfian unigram distribution. Reported:
median seconds of `--repeats` blocking calls, the ratio to the full softmax of the same run,
the compiled program's memory (temporaries + arguments + outputs, from XLA's
`memory_analysis`, and the temporaries alone), and, when `import torch` works,
`F.cross_entropy` and `nn.AdaptiveLogSoftmaxWithLoss` on the same shapes. A head whose
compiled program needs more than `--memory-limit-gb` is skipped and marked so.

Beside the heads: optax's plain cross-entropy on materialized logits, and the floor that
every dense table gradient pays (zeros [V, D] plus a scatter of K + N rows).

Writes benchmarks/results/softmax.md and softmax.png (time against V, log-log);
`--quick` uses small shapes and writes softmax_quick.*, `--heads` writes *_partial.*.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RESULTS,
    interleaved,
    machine,
    markdown_table,
    matmul_peak,
    torch_or_none,
    write_result,
)

from seqjax.config import HeadConfig  # noqa: E402
from seqjax.heads import (  # noqa: E402
    build_head,
    huffman_tree,
    negative_sampling_loss,
    nce_loss,
    sampled_softmax_loss,
    samplers,
    tree_path_loss,
    tree_paths,
)
from seqjax.heads.rows import compact  # noqa: E402

CHUNK_SIZE = 4096


@dataclasses.dataclass(frozen=True)
class Shapes:
    rows: int  # N
    features: int  # D
    samples: int  # K


def head_configs(vocab_size: int, shapes: Shapes) -> dict[str, HeadConfig]:
    """The heads benchmarked at one V; adaptive cutoffs at 2% and 20% of V (2k/20k at 100k)."""
    sampling = dict(num_samples=shapes.samples)
    return {
        "full": HeadConfig(kind="full"),
        "full, chunked": HeadConfig(kind="full", chunk_size=min(CHUNK_SIZE, vocab_size)),
        "sampled (log-uniform)": HeadConfig(kind="sampled", proposal="log_uniform", **sampling),
        "NCE (log-uniform)": HeadConfig(kind="nce", proposal="log_uniform", **sampling),
        "negative (unigram^0.75)": HeadConfig(kind="negative", proposal="unigram", power=0.75, **sampling),
        "class (sqrt V classes)": HeadConfig(kind="class"),
        "tree, balanced": HeadConfig(kind="tree", tree="balanced"),
        "tree, Huffman": HeadConfig(kind="tree", tree="huffman"),
        "adaptive (div 4)": HeadConfig(
            kind="adaptive", cutoffs=adaptive_cutoffs(vocab_size), div_value=4.0
        ),
    }


def adaptive_cutoffs(vocab_size: int) -> tuple[int, ...]:
    return (round(0.02 * vocab_size), round(0.2 * vocab_size))


def zipf_counts(vocab_size: int) -> np.ndarray:
    """Frequency-sorted unigram counts ∝ 1 / rank, the shape of natural-language vocabularies."""
    return np.maximum(1, np.round(1e9 / np.arange(1, vocab_size + 1))).astype(np.int64)


def make_inputs(vocab_size: int, shapes: Shapes, seed: int = 0):
    rng = np.random.default_rng(seed)
    counts = zipf_counts(vocab_size)
    targets = rng.choice(vocab_size, size=shapes.rows, p=counts / counts.sum()).astype(np.int32)
    hidden = rng.normal(size=(shapes.rows, shapes.features)).astype(np.float32)
    return counts, jnp.asarray(hidden), jnp.asarray(targets)


def jax_case(cfg: HeadConfig, vocab_size: int, counts, hidden, targets):
    """A compiled value_and_grad of the head's loss, its arguments, and its memory in bytes."""
    head = build_head(cfg, vocab_size, counts)
    key = jax.random.key(0)
    shapes = jax.eval_shape(
        lambda k: head.init({"params": k}, hidden, targets, k, None, None, method="loss"), key
    )["params"]
    leaves, treedef = jax.tree.flatten(shapes)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    params = jax.tree.unflatten(
        treedef,
        [0.05 * jax.random.normal(k, leaf.shape, leaf.dtype) for k, leaf in zip(keys, leaves)],
    )

    def loss(params, hidden, key):
        return head.apply({"params": params}, hidden, targets, key, None, None, method="loss")[0]

    return _compiled(jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), params, hidden, key)


ROW_GRADIENT_LOSSES = {
    "sampled (log-uniform), row gradients": ("log_uniform", True, "sampled"),
    "NCE (log-uniform), row gradients": ("log_uniform", True, "nce"),
    "negative (unigram^0.75), row gradients": ("unigram", False, "negative"),
}


def row_gradient_case(name: str, vocab_size: int, shapes: Shapes, counts, hidden, targets):
    """A sampling loss differentiated with respect to the rows it reads (`seqjax.heads.rows`):
    draw K samples, compact targets + samples to their distinct ids, gather those rows, and
    return the loss with the gradients of the hidden states and of the [N + K, D] rows — what
    TensorFlow's IndexedSlices gradient holds — instead of a dense [V, D] table gradient."""
    proposal, unique, kind = ROW_GRADIENT_LOSSES[name]
    sampler = samplers.log_uniform(vocab_size) if proposal == "log_uniform" else samplers.unigram(counts, 0.75)
    rng = np.random.default_rng(2)
    weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab_size,), jnp.float32)
    rows = shapes.rows

    def step(weights, biases, hidden, key):
        drawn = sampler.sample(key, shapes.samples, unique=unique)
        target_log_q = sampler.log_expected_count(targets, shapes.samples, unique=unique)
        distinct, local = compact(jnp.concatenate([targets, drawn.ids]))

        def loss(hidden, row_weights, row_biases):
            args = (hidden, row_weights, row_biases, local[:rows], local[rows:])
            if kind == "negative":
                return negative_sampling_loss(*args).mean()
            loss_fn = sampled_softmax_loss if kind == "sampled" else nce_loss
            return loss_fn(*args, drawn.log_expected_counts, target_log_q).mean()

        value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2))(hidden, weights[distinct], biases[distinct])
        return value, grads, distinct

    return _compiled(jax.jit(step), weights, biases, hidden, jax.random.key(0))


TREE_ROW_GRADIENTS = "tree, Huffman, row gradients"


def tree_row_gradient_case(vocab_size: int, shapes: Shapes, counts, hidden, targets):
    """The Huffman tree loss differentiated with respect to the [N, L, D] node rows gathered
    along the targets' paths (`tree_paths`), instead of the dense [V − 1, D] node table; the
    path node ids index the row gradient, repeats included."""
    tree = huffman_tree(counts)
    rng = np.random.default_rng(2)
    weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size - 1, shapes.features)), jnp.float32)
    biases = jnp.zeros((vocab_size - 1,), jnp.float32)

    def step(weights, biases, hidden, targets):
        nodes, codes, mask = tree_paths(tree, targets)

        def loss(hidden, path_weights, path_biases):
            return tree_path_loss(hidden, path_weights, path_biases, codes, mask).mean()

        value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2))(hidden, weights[nodes], biases[nodes])
        return value, grads, nodes

    return _compiled(jax.jit(step), weights, biases, hidden, targets)


def baseline_cases(vocab_size: int, shapes: Shapes, hidden, targets):
    """JAX references beside the heads, as {name: builder}: optax's plain cross-entropy on
    materialized logits, and the floor every table gradient pays: one dense [V, D] gradient
    built from K + N rows."""
    import optax

    def optax_case():
        rng = np.random.default_rng(2)
        weights = jnp.asarray(0.05 * rng.normal(size=(vocab_size, shapes.features)), jnp.float32)
        biases = jnp.zeros((vocab_size,), jnp.float32)

        def loss(weights, biases, hidden):
            logits = hidden @ weights.T + biases
            return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

        return _compiled(jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))), weights, biases, hidden)

    def floor_case():
        ids = jnp.asarray(np.random.default_rng(3).integers(0, vocab_size, shapes.samples + shapes.rows), jnp.int32)
        rows = jnp.ones((ids.shape[0], shapes.features), jnp.float32)
        table = jax.ShapeDtypeStruct((vocab_size, shapes.features), jnp.float32)
        return _compiled(jax.jit(lambda ids, rows: jnp.zeros(table.shape, table.dtype).at[ids].add(rows)), ids, rows)

    return {"optax cross-entropy": optax_case, "dense [V, D] gradient floor": floor_case}


def _compiled(jitted, *args):
    """(blocking call, temporaries + arguments + outputs bytes, temporaries bytes)."""
    executable = jitted.lower(*args).compile()
    memory = executable.memory_analysis()
    total = memory.temp_size_in_bytes + memory.argument_size_in_bytes + memory.output_size_in_bytes
    return (lambda: jax.block_until_ready(executable(*args))), total, memory.temp_size_in_bytes


def torch_cases(torch, vocab_size: int, hidden, targets, memory_limit: float):
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

    def inputs():
        h = torch.tensor(np.asarray(hidden), requires_grad=True)
        return h, torch.tensor(np.asarray(targets), dtype=torch.long)

    def full_case():
        if estimates["full"] > memory_limit:
            return None, estimates["full"], None
        h, t = inputs()
        weights = (0.05 * torch.randn(vocab_size, features)).requires_grad_()
        biases = torch.zeros(vocab_size, requires_grad=True)

        def step():
            h.grad = weights.grad = biases.grad = None
            nn.functional.cross_entropy(h @ weights.T + biases, t).backward()

        return step, None, None

    def adaptive_case():
        if estimates["adaptive"] > memory_limit:
            return None, estimates["adaptive"], None
        h, t = inputs()
        adaptive = nn.AdaptiveLogSoftmaxWithLoss(features, vocab_size, list(cutoffs), div_value=4.0)

        def step():
            h.grad = None
            adaptive.zero_grad(set_to_none=True)
            adaptive(h, t).loss.backward()

        return step, None, None

    return {"torch F.cross_entropy": full_case, "torch AdaptiveLogSoftmaxWithLoss": adaptive_case}


def run(vocab_sizes, shapes: Shapes, repeats: int, memory_limit: float, only=None):
    """Returns {V: {name: (seconds or None, total bytes or None, temp bytes or None, note)}}.

    Cases are compiled in groups that fit `memory_limit` together and each group is timed
    round-robin (`common.interleaved`), so that load from elsewhere hits its members alike.
    `only`: substrings of the names to run (None: all); "full" always runs, as the baseline.
    """
    torch = torch_or_none()
    results = {}
    for vocab_size in vocab_sizes:
        counts, hidden, targets = make_inputs(vocab_size, shapes)
        row = results[vocab_size] = {}
        builders = {}
        for name, cfg in head_configs(vocab_size, shapes).items():
            if cfg.kind in ("sampled", "nce", "negative") and cfg.num_samples >= vocab_size:
                row[name] = (None, None, None, f"K={cfg.num_samples} >= V")
            else:
                builders[name] = functools.partial(jax_case, cfg, vocab_size, counts, hidden, targets)
        if shapes.samples < vocab_size:
            for name in ROW_GRADIENT_LOSSES:
                builders[name] = functools.partial(row_gradient_case, name, vocab_size, shapes, counts, hidden, targets)
        builders[TREE_ROW_GRADIENTS] = functools.partial(
            tree_row_gradient_case, vocab_size, shapes, counts, hidden, targets
        )
        builders.update(baseline_cases(vocab_size, shapes, hidden, targets))
        if torch is not None:
            builders.update(torch_cases(torch, vocab_size, hidden, targets, memory_limit))
        builders = {n: b for n, b in builders.items() if not only or n == "full" or any(w in n for w in only)}
        group, group_bytes = {}, 0
        for index, (name, build) in enumerate(builders.items()):
            fn, total, temp = build()
            if fn is None or (total and total > memory_limit):
                row[name] = (None, total, temp, f"skipped: needs {total / 2**30:.1f} GiB")
                _print_row(vocab_size, name, row[name])
            else:
                group[name], group_bytes = (fn, total, temp), group_bytes + (total or 0)
            last = index == len(builders) - 1
            if group and (last or group_bytes > memory_limit / 2):
                _time_group(vocab_size, group, repeats, row)
                group, group_bytes = {}, 0
    return results


def _time_group(vocab_size: int, group: dict, repeats: int, row: dict) -> None:
    for fn, _, _ in group.values():
        fn()  # warm-up: caches, allocator, torch's first-call work
    seconds = interleaved({name: fn for name, (fn, _, _) in group.items()}, repeats)
    for name, (_, total, temp) in group.items():
        row[name] = (seconds[name], total, temp, "")
        _print_row(vocab_size, name, row[name])


def _print_row(vocab_size: int, name: str, result) -> None:
    seconds, total, _, note = result
    memory = f"{total / 2**20:>8.0f} MiB" if total else ""
    print(f"V={vocab_size:>9,} {name:<40} {_fmt_seconds(seconds):>12} {memory} {note}", flush=True)


def _fmt_seconds(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def tables(results, shapes: Shapes, peak: float) -> str:
    parts = []
    for vocab_size, row in results.items():
        full_seconds = row["full"][0]
        flops = 6.0 * shapes.rows * shapes.features * vocab_size  # three [N,D]x[D,V] matmuls
        lines = []
        for name, (seconds, total, temp, note) in row.items():
            speedup = f"{full_seconds / seconds:,.1f}x" if seconds and full_seconds else "-"
            dense = "full" in name or "cross" in name
            peak_share = f"{flops / seconds / 1e9 / peak:.0%}" if seconds and dense else ""
            memory = f"{total / 2**20:,.0f}" if total else "-"
            temp_memory = f"{temp / 2**20:,.0f}" if temp is not None else "-"
            lines.append([name, _fmt_seconds(seconds), speedup, peak_share, memory, temp_memory, note])
        header = ["head", "fwd+bwd", "speed-up vs full", "% of matmul peak", "memory MiB", "temp MiB", "note"]
        parts.append(f"### V = {vocab_size:,}\n\n" + markdown_table(header, lines))
    return "\n\n".join(parts)


def target_checks(results, peak: float, shapes: Shapes) -> list[str]:
    """The issue's targets at V = 100k (or the largest V measured), each with its measurement."""
    vocab_size = 100_000 if 100_000 in results else max(results)
    row = results[vocab_size]

    def seconds(name):
        return row.get(name, (None,))[0]

    def speedup(name):
        return seconds("full") / seconds(name) if seconds(name) and seconds("full") else float("nan")

    lines = [f"Targets at V = {vocab_size:,}:"]
    if seconds("full"):
        share = 6.0 * shapes.rows * shapes.features * vocab_size / seconds("full") / 1e9 / peak
        lines.append(f"- full softmax at >= 85% of the matmul peak: {share:.0%}")
    full_temp, chunk_temp = row["full"][2], row.get("full, chunked", (None, None, None))[2]
    if full_temp and chunk_temp and seconds("full, chunked"):
        lines.append(
            f"- chunked: >= 10x less memory at no more time: temporaries {full_temp / chunk_temp:.1f}x less, "
            f"total {row['full'][1] / row['full, chunked'][1]:.1f}x less, "
            f"time {seconds('full, chunked') / seconds('full'):.2f}x"
        )
    floor = seconds("dense [V, D] gradient floor")
    wanted_speedups = (
        ("sampled (log-uniform)", 100), ("NCE (log-uniform)", 100),
        ("sampled (log-uniform), row gradients", 100), ("NCE (log-uniform), row gradients", 100),
        ("tree, Huffman", 200), (TREE_ROW_GRADIENTS, 200),
    )
    for name, wanted in wanted_speedups:
        if seconds(name):
            # Time minus floor is ill-conditioned when the two are close: report the floor's share.
            share = ""
            if floor and "row gradients" not in name:
                share = f" (the dense [V, D] table gradient alone is {min(floor / seconds(name), 1.0):.0%} of it)"
            lines.append(f"- {name} >= {wanted}x faster than full: {speedup(name):.1f}x{share}")
    if seconds("torch AdaptiveLogSoftmaxWithLoss") and seconds("adaptive (div 4)"):
        ratio = seconds("torch AdaptiveLogSoftmaxWithLoss") / seconds("adaptive (div 4)")
        lines.append(f"- adaptive >= 1.5x faster than torch's AdaptiveLogSoftmaxWithLoss: {ratio:.2f}x")
    vocab_sizes = sorted(results)
    if len(vocab_sizes) > 1:
        low, high = vocab_sizes[0], vocab_sizes[-1]
        growing = ("sampled (log-uniform)", "sampled (log-uniform), row gradients", "tree, Huffman", TREE_ROW_GRADIENTS)
        for name in growing:
            if results[low].get(name, (None,))[0] and results[high].get(name, (None,))[0]:
                growth = results[high][name][0] / results[low][name][0]
                lines.append(f"- {name} time V={low:,} -> V={high:,}: x{growth:.1f} (V grows x{high / low:.0f})")
    return lines


def plot(results, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(next(iter(results.values())))
    figure, axes = plt.subplots(figsize=(8, 5.5))
    for name in names:
        points = [(v, row[name][0]) for v, row in results.items() if name in row and row[name][0]]
        if points:
            xs, ys = zip(*points)
            axes.plot(xs, [y * 1e3 for y in ys], marker="o", linestyle="--" if "torch" in name else "-", label=name)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("vocabulary size V")
    axes.set_ylabel("forward + backward, ms (median)")
    axes.set_title("Softmax heads: time against vocabulary size")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, for a smoke run")
    parser.add_argument("--vocab", default=None, help="comma-separated V (default 10000,100000,1000000)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--heads", default=None, help="comma-separated substrings of head names (default: all)")
    parser.add_argument("--memory-limit-gb", type=float, default=None, help="default: 60%% of physical memory")
    args = parser.parse_args(argv)
    if args.quick:
        shapes, vocab_sizes, repeats, name = Shapes(256, 64, 64), (1_000, 10_000), 3, "softmax_quick"
    else:
        shapes, vocab_sizes, repeats, name = Shapes(2048, 512, 1024), (10_000, 100_000, 1_000_000), 5, "softmax"
    if args.vocab:
        vocab_sizes = tuple(int(v) for v in args.vocab.split(","))
    if args.heads:
        name += "_partial"  # a subset of heads never overwrites the full table
    repeats = args.repeats or repeats
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    memory_limit = args.memory_limit_gb * 2**30 if args.memory_limit_gb else 0.6 * physical

    info = machine()
    print("machine:", "; ".join(f"{k} {v}" for k, v in info.items()))
    peak = matmul_peak()
    print(f"measured fp32 matmul peak: {peak:.0f} GFLOP/s; N={shapes.rows} D={shapes.features} K={shapes.samples}")
    results = run(vocab_sizes, shapes, repeats, memory_limit, args.heads.split(",") if args.heads else None)
    checks = target_checks(results, peak, shapes)
    body = (
        f"Measured fp32 matmul peak (JAX, 2048^3): {peak:.0f} GFLOP/s. N = {shapes.rows} rows, "
        f"D = {shapes.features}, K = {shapes.samples} samples, targets Zipfian; one jitted value_and_grad "
        f"with respect to the hidden states and every parameter (dense gradients; the \"row gradients\" rows "
        f"differentiate the sampling losses with respect to the N + K table rows they read instead, and "
        f"the Huffman tree loss with respect to the [N, L, D] node rows on the targets' paths, "
        f"`seqjax.heads.rows.compact`), median of {repeats} "
        f"calls timed round-robin. "
        f"Memory: XLA memory_analysis of the compiled step, temporaries + arguments + outputs, and the "
        f"temporaries alone. Chunked full softmax: blocks of {CHUNK_SIZE} words. Adaptive cutoffs at 2% and "
        f"20% of V.\n\n" + tables(results, shapes, peak) + "\n\n" + "\n".join(checks) + "\n"
    )
    print("\n".join(checks))
    path = write_result(name, "Softmax heads: forward+backward time and memory", body)
    plot(results, os.path.join(RESULTS, f"{name}.png"))
    print("wrote", path, "and", os.path.join(RESULTS, f"{name}.png"))


if __name__ == "__main__":
    main()
