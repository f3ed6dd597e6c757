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
every dense table gradient pays (zeros [V, D] plus a scatter of K + N rows). The cases live in
softmax_cases.py.

Writes benchmarks/results/softmax.md and softmax.png (time against V, log-log);
`--quick` uses small shapes and writes softmax_quick.*, `--heads` writes *_partial.*.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RESULTS,
    interleaved,
    machine,
    markdown_table,
    matmul_peak,
    save_figure,
    torch_or_none,
    write_result,
)
from softmax_cases import (  # noqa: E402
    ROW_GRADIENT_LOSSES,
    TREE_ROW_GRADIENTS,
    Shapes,
    baseline_cases,
    head_configs,
    jax_case,
    make_inputs,
    row_gradient_case,
    torch_cases,
    tree_row_gradient_case,
)


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
        for name in TREE_ROW_GRADIENTS:
            builders[name] = functools.partial(
                tree_row_gradient_case, name, vocab_size, shapes, counts, hidden, targets
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
    seconds = interleaved({name: fn for name, (fn, _, _) in group.items()}, repeats, warm_up=True)
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


HUFFMAN_ROWS = "tree, Huffman, row gradients"
SLOPE_CASES = (
    "sampled (log-uniform), row gradients",
    "NCE (log-uniform), row gradients",
    "negative (unigram^0.75), row gradients",
    "tree, Huffman, row gradients",
    "tree, balanced, row gradients",
)


def target_checks(results, peak: float, shapes: Shapes) -> list[str]:
    """The targets at V = 100k (or the largest V measured), each with its measurement and
    whether it holds, and the log-log slope of time against V of the row-gradient cases."""
    vocab_size = 100_000 if 100_000 in results else max(results)
    row = results[vocab_size]

    def seconds(name):
        return row.get(name, (None,))[0]

    def speedup(name, over="full"):
        return seconds(over) / seconds(name) if seconds(name) and seconds(over) else float("nan")

    def verdict(holds):
        return "met" if holds else "**missed**"

    lines = [f"Targets at V = {vocab_size:,}:"]
    if seconds("full"):
        share = 6.0 * shapes.rows * shapes.features * vocab_size / seconds("full") / 1e9 / peak
        lines.append(f"- full softmax >= 80% of the matmul peak: {share:.0%} ({verdict(share >= 0.8)})")
    if seconds("optax cross-entropy"):
        ratio = speedup("full", over="optax cross-entropy")
        lines.append(f"- full softmax >= 1.3x optax: {ratio:.2f}x ({verdict(ratio >= 1.3)})")
    materialized, default = row.get("full, materialized", (None,) * 3), row["full"]
    if materialized[2] and default[2]:
        fewer = materialized[2] / default[2]
        lines.append(
            f"- full softmax with >= 10x fewer temporaries than materialized logits: {fewer:.1f}x "
            f"({verdict(fewer >= 10)}; total memory {materialized[1] / default[1]:.1f}x less)"
        )
    for name, wanted in (
        ("class (sqrt V classes)", 10),
        (HUFFMAN_ROWS, 200),
        ("sampled (log-uniform), row gradients", 100),
        ("NCE (log-uniform), row gradients", 100),
    ):
        if seconds(name):
            lines.append(
                f"- {name} >= {wanted}x faster than full: {speedup(name):.1f}x ({verdict(speedup(name) >= wanted)})"
            )
    if seconds("torch AdaptiveLogSoftmaxWithLoss") and seconds("adaptive (div 4)"):
        ratio = seconds("torch AdaptiveLogSoftmaxWithLoss") / seconds("adaptive (div 4)")
        lines.append(
            f"- adaptive >= 1.5x faster than torch's AdaptiveLogSoftmaxWithLoss: {ratio:.2f}x ({verdict(ratio >= 1.5)})"
        )
    vocab_sizes = sorted(results)
    if len(vocab_sizes) > 1:
        low, high = vocab_sizes[0], vocab_sizes[-1]
        for name in SLOPE_CASES:
            if results[low].get(name, (None,))[0] and results[high].get(name, (None,))[0]:
                slope = np.log(results[high][name][0] / results[low][name][0]) / np.log(high / low)
                lines.append(
                    f"- {name}: log-log slope of time against V = {low:,} -> {high:,} <= 0.2: "
                    f"{slope:.2f} ({verdict(slope <= 0.2)})"
                )
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
    save_figure(figure, path)


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
        f'with respect to the hidden states and every parameter (dense gradients; the "row gradients" rows '
        f"differentiate the sampling losses with respect to the N + K table rows they read instead, "
        f"`seqjax.heads.rows.compact`, and the Huffman tree loss with respect to the [N, L, D] node rows "
        f"on the targets' paths), median of {repeats} "
        f"calls timed round-robin. "
        f"Memory: XLA memory_analysis of the compiled step, temporaries + arguments + outputs, and the "
        f'temporaries alone. "full" is the formulation the head picks by shape (`default_chunk_size`), '
        f'"full, materialized" the [N, V] logits. Adaptive cutoffs at 2% and '
        f"20% of V.\n\n" + tables(results, shapes, peak) + "\n\n" + "\n".join(checks) + "\n"
    )
    body += (
        "\nWhere the time of each head goes, part by part (the full softmax against its bare matmuls, adaptive "
        "against torch on each part, the Huffman rows against the gather and write floors, the sampled rows "
        "against V): `softmax_profile.md`, from `benchmarks/softmax_profile.py`.\n"
    )
    print("\n".join(checks))
    path = write_result(name, "Softmax heads: forward+backward time and memory", body)
    plot(results, os.path.join(RESULTS, f"{name}.png"))
    print("wrote", path, "and", os.path.join(RESULTS, f"{name}.png"))


if __name__ == "__main__":
    main()
