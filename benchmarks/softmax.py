"""Forward+backward time and peak memory of every softmax head, against the full softmax and torch.

    python benchmarks/softmax.py [--quick] [--vocab 10000,100000,1000000] [--runs 3] [--repeats 3]

For each vocabulary size V, every head of `seqjax.heads` (built by `build_head`, parameters
random) runs one jitted `value_and_grad` of its training loss with respect to the hidden
states and all of its parameters (dense gradients, as an optimizer update needs them), on
N hidden rows of width D with targets drawn from a Zipfian unigram distribution. Reported:
the median over `--runs` runs of each run's median of its blocking calls (`--repeats` turns a
run, one call per turn for a case whose warm-up took over SLOW_SECONDS, and within a turn a
burst of calls lasting about BURST_SECONDS for a fast one), the ratio to the full softmax,
the compiled program's memory (temporaries + arguments + outputs, from XLA's
`memory_analysis`, and the temporaries alone), and, when `import torch` works,
`F.cross_entropy` and `nn.AdaptiveLogSoftmaxWithLoss` on the same shapes. A head whose
compiled program needs more than `--memory-limit-gb` is skipped and marked so.

Beside the heads: optax's plain cross-entropy on materialized logits, the floor that every
dense table gradient pays (zeros [V, D] plus a scatter of K + N rows), and at the targets' V
the floor of each target: the full softmax's three matmuls with the one exponential per logit
any exact softmax computes (and, for comparison, the matmuls alone), the sampling losses' three
[N, D] x [D, K] products alone, the Huffman rows' dense top products and deep-row gathers
alone, and the adaptive softmax's products (the head, each tail on its gathered rows) with an
exponential per score.
The process runs as the `seqjax` executable runs (`seqjax.training.core.host_heap`: it restarts
itself with transparent huge pages for the host heap where that applies, which the header's
GLIBC_TUNABLES shows), for the JAX cases and torch alike: each fresh allocation otherwise
faults its pages in anew at every call, a cost that weighs most on the fastest heads
(the Huffman rows at V = 100k: 35.3 -> 28.0 ms, medians of 25 calls, 2-core Intel Xeon).
The cases live in softmax_cases.py, the floors in softmax_floors.py and the targets checked in
softmax_targets.py. The 1-minute load average is sampled while the cases run,
and the whole run's wall time, both reported.

Writes benchmarks/results/softmax.md and softmax.png (time against V, log-log);
`--quick` uses small shapes and writes softmax_quick.*, `--heads` writes *_partial.*.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from seqjax.training.core.host_heap import restart_with_huge_pages

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RESULTS,
    machine,
    markdown_table,
    matmul_peak,
    save_figure,
    torch_or_none,
    write_result,
)
from softmax_cases import (  # noqa: E402
    ADAPTIVE_CAPACITIES,
    ROW_GRADIENT_LOSSES,
    TOP_LEVELS,
    TREE_ROW_GRADIENTS,
    CaseBuilder,
    Shapes,
    adaptive_capacity_case,
    baseline_cases,
    head_configs,
    jax_case,
    make_inputs,
    row_gradient_case,
    torch_cases,
    tree_row_gradient_case,
)
from softmax_floors import (  # noqa: E402
    adaptive_floor_case,
    full_floor_case,
    huffman_floor_case,
    peak_case,
    sampled_floor_case,
)
from softmax_targets import (  # noqa: E402
    ADAPTIVE_FLOOR,
    FULL_FLOOR,
    FULL_PRODUCTS,
    HUFFMAN_FLOOR,
    PEAK,
    PEAK_SIZE,
    SAMPLED_FLOOR,
    PerRun,
    Result,
    Results,
    target_checks,
    target_vocab,
)

# A case whose warm-up call took longer is called once per run: the V = 1M full softmax (about a
# minute). Below it every case gets `--repeats` calls a run, the 4-6 s ones at V = 100k included, whose
# single calls beside three of the peak's moved their share of the peak between runs (74, 68 and 66%
# in one three-run partial run on a 2-core Intel Xeon).
SLOW_SECONDS = 10.0
# A case faster than this gets several calls back to back within each turn, as many as last about
# this long (at most MAX_BURST): three calls a run left a 50 ms case's median to whichever burst of
# load met one of them (the sampled rows at V = 100k: 118.6, 100.3 and 87.6x the full softmax in
# the three runs of one benchmark, where their products alone held 132x).
BURST_SECONDS = 0.6
MAX_BURST = 10
# Cases compiled together: {name: (blocking call, total bytes or None, temp bytes or None)}.
Group = dict[str, tuple[Callable[[], object], int | None, int | None]]


def run(
    vocab_sizes: Sequence[int],
    shapes: Shapes,
    runs: int,
    repeats: int,
    memory_limit: float,
    only: list[str] | None = None,
) -> tuple[Results, PerRun, list[float]]:
    """Returns ({V: {name: (median seconds or None, total bytes or None, temp bytes or None, note)}},
    {V: {name: [seconds of each run]}}, [1-minute load averages sampled while timing]).

    Cases are compiled in groups that fit `memory_limit` together and each group is timed
    round-robin, `runs` times over, so that load from elsewhere hits its members alike.
    `only`: substrings of the names to run (None: all); "full" always runs, as the baseline.
    """
    torch = torch_or_none()
    results: Results = {}
    per_run: PerRun = {}
    loads: list[float] = []
    for vocab_size in vocab_sizes:
        counts, hidden, targets = make_inputs(vocab_size, shapes)
        row, row_runs = results.setdefault(vocab_size, {}), per_run.setdefault(vocab_size, {})
        builders: dict[str, CaseBuilder] = {}
        for name, cfg in head_configs(vocab_size, shapes).items():
            if cfg.kind in ("sampled", "nce", "negative") and cfg.num_samples >= vocab_size:
                row[name] = (None, None, None, f"K={cfg.num_samples} >= V")
            else:
                builders[name] = functools.partial(jax_case, cfg, vocab_size, counts, hidden, targets)
            if name == "full" and vocab_size == target_vocab(vocab_sizes):  # in the full's group
                builders[PEAK] = functools.partial(peak_case, PEAK_SIZE)
        if shapes.samples < vocab_size:
            for name in ROW_GRADIENT_LOSSES:
                builders[name] = functools.partial(row_gradient_case, name, vocab_size, shapes, counts, hidden, targets)
        for name in TREE_ROW_GRADIENTS:
            builders[name] = functools.partial(
                tree_row_gradient_case, name, vocab_size, shapes, counts, hidden, targets
            )
        builders[ADAPTIVE_CAPACITIES] = functools.partial(adaptive_capacity_case, vocab_size, shapes, hidden, targets)
        builders.update(baseline_cases(vocab_size, shapes, hidden, targets))
        if vocab_size == target_vocab(vocab_sizes):  # the floors where the targets are checked
            builders[FULL_PRODUCTS] = functools.partial(full_floor_case, vocab_size, shapes, hidden, False)
            builders[FULL_FLOOR] = functools.partial(full_floor_case, vocab_size, shapes, hidden, True)
            builders[SAMPLED_FLOOR] = functools.partial(sampled_floor_case, shapes, hidden)
            builders[ADAPTIVE_FLOOR] = functools.partial(adaptive_floor_case, vocab_size, shapes, hidden, targets)
            builders[HUFFMAN_FLOOR] = functools.partial(huffman_floor_case, vocab_size, shapes, counts, hidden, targets)
        if torch is not None:
            builders.update(torch_cases(torch, vocab_size, hidden, targets, memory_limit))
        builders = {n: b for n, b in builders.items() if not only or n == "full" or any(w in n for w in only)}
        group: Group = {}
        group_bytes = 0
        for index, (name, build) in enumerate(builders.items()):
            fn, total, temp = build()
            if fn is None or (total and total > memory_limit):
                row[name] = (None, total, temp, f"skipped: needs {(total or 0) / 2**30:.1f} GiB")
                _print_row(vocab_size, name, row[name])
            else:
                group[name], group_bytes = (fn, total, temp), group_bytes + (total or 0)
            last = index == len(builders) - 1
            if group and (last or group_bytes > memory_limit / 2):
                _time_group(vocab_size, group, runs, repeats, row, row_runs, loads)
                group, group_bytes = {}, 0
    return results, per_run, loads


def _time_group(
    vocab_size: int,
    group: Group,
    runs: int,
    repeats: int,
    row: dict[str, Result],
    row_runs: dict[str, list[float]],
    loads: list[float],
) -> None:
    """Times the group's calls round-robin, `runs` times; records each run's median per case
    (over its `repeats` turns, or one for a slow case, of a burst of calls each)."""
    turns: dict[str, int] = {}
    bursts: dict[str, int] = {}
    for name, (fn, _, _) in group.items():
        start = time.perf_counter()
        fn()  # warm-up: caches, allocator, torch's first-call work
        seconds = time.perf_counter() - start
        turns[name] = 1 if seconds > SLOW_SECONDS else repeats
        bursts[name] = max(1, min(MAX_BURST, int(BURST_SECONDS / seconds)))
    for name in group:
        row_runs[name] = []
    for _ in range(runs):
        times: dict[str, list[float]] = {name: [] for name in group}
        for turn in range(repeats):
            for name, (fn, _, _) in group.items():
                for _ in range(bursts[name] if turn < turns[name] else 0):
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
        loads.append(os.getloadavg()[0])
        for name in group:
            row_runs[name].append(statistics.median(times[name]))
    for name, (_, total, temp) in group.items():
        row[name] = (statistics.median(row_runs[name]), total, temp, "")
        _print_row(vocab_size, name, row[name])


def _print_row(vocab_size: int, name: str, result: Result) -> None:
    seconds, total, _, note = result
    memory = f"{total / 2**20:>8.0f} MiB" if total else ""
    print(f"V={vocab_size:>9,} {name:<40} {_fmt_seconds(seconds):>12} {memory} {note}", flush=True)


def _fmt_seconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def tables(results: Results, shapes: Shapes, peak: float) -> str:
    parts = []
    for vocab_size, row in results.items():
        full_seconds = row["full"][0]
        flops = 6.0 * shapes.rows * shapes.features * vocab_size  # three [N,D]x[D,V] matmuls
        peak_seconds = row.get(PEAK, (None,))[0]
        if peak_seconds:  # the peak timed round-robin with these cases
            peak = 2.0 * PEAK_SIZE**3 / peak_seconds / 1e9
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


def plot(results: Results, path: str) -> None:
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
    restart_with_huge_pages()  # XLA's and torch's host buffers as a `seqjax` process has them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, for a smoke run")
    parser.add_argument("--vocab", default=None, help="comma-separated V (default 10000,100000,1000000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of every group (compiled once); medians")
    parser.add_argument("--repeats", type=int, default=3, help="turns per case per run (1 for slow cases)")
    parser.add_argument("--heads", default=None, help="comma-separated substrings of head names (default: all)")
    parser.add_argument("--memory-limit-gb", type=float, default=None, help="default: 60%% of physical memory")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.repeats < 1:
        raise SystemExit(f"--runs and --repeats must be >= 1, got {args.runs} and {args.repeats}")
    vocab_sizes: tuple[int, ...]
    if args.quick:
        shapes, vocab_sizes, name = Shapes(256, 64, 64), (1_000, 10_000), "softmax_quick"
    else:
        shapes, vocab_sizes, name = Shapes(2048, 512, 1024), (10_000, 100_000, 1_000_000), "softmax"
    if args.vocab:
        vocab_sizes = tuple(int(v) for v in args.vocab.split(","))
    if args.heads:
        name += "_partial"  # a subset of heads never overwrites the full table
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    memory_limit = args.memory_limit_gb * 2**30 if args.memory_limit_gb else 0.6 * physical

    began = time.perf_counter()
    info = machine()
    print("machine:", "; ".join(f"{k} {v}" for k, v in info.items()))
    peak = matmul_peak()
    print(f"measured fp32 matmul peak: {peak:.0f} GFLOP/s; N={shapes.rows} D={shapes.features} K={shapes.samples}")
    only = args.heads.split(",") if args.heads else None
    results, per_run, loads = run(vocab_sizes, shapes, args.runs, args.repeats, memory_limit, only)
    checks = target_checks(results, per_run, peak, shapes)
    minutes = (time.perf_counter() - began) / 60
    body = (
        f"Measured fp32 matmul peak (JAX, 2048^3) at the start: {peak:.0f} GFLOP/s; the shares of the peak "
        f"at V = {target_vocab(vocab_sizes):,} read the peak timed round-robin with the cases there, run by run "
        f'(the row "{PEAK}"), as this machine\'s speed drifts. 1-minute load average sampled after '
        f"each run of each group: min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f} "
        f"(the benchmark itself keeps both cores busy: about 2). Whole benchmark: {minutes:.1f} min. "
        f"N = {shapes.rows} rows, D = {shapes.features}, K = {shapes.samples} samples, targets Zipfian; one jitted "
        f'value_and_grad with respect to the hidden states and every parameter (dense gradients; the "row '
        f'gradients" rows differentiate the sampling losses with respect to the N + K table rows they read '
        f"instead, `seqjax.heads.rows.read_rows` with `gathered=True`, "
        f"and the tree losses with respect to the top {TOP_LEVELS} levels' "
        f"nodes and the node rows of the steps below them, `seqjax.heads.tree_rows`); the median over "
        f"{args.runs} runs of each run's median of its calls, timed round-robin in {args.repeats} turns a run (1 "
        f"for a case whose warm-up took over {SLOW_SECONDS:.0f} s), a turn calling a case back to back for about "
        f"{BURST_SECONDS} s (1 to {MAX_BURST} calls: the fast cases read many calls a run). Memory: XLA "
        f"memory_analysis of the compiled step, temporaries + arguments + outputs, and the temporaries alone. "
        f'"full" is the formulation the head picks by shape '
        f"and memory for float32 inputs (`default_chunk_size`, `default_block_residuals`: float32 exponentials "
        f'kept while they fit), "full, bfloat16 blocks" keeps bfloat16 ones (a bfloat16 run\'s default), '
        f'"full, materialized" the [N, V] logits; '
        f'the "(floor)" rows time what a target cannot do without. Adaptive cutoffs at 2% and 20% of V.\n\n'
        + tables(results, shapes, peak)
        + "\n\n"
        + "\n".join(checks)
        + "\n"
    )
    body += (
        "\nWhere the time of each head goes, part by part (the full softmax against its bare matmuls, adaptive "
        "against torch on each part, the Huffman rows against their floor, the sampled rows against V): "
        "`softmax_profile.md`, from `benchmarks/softmax_profile.py`.\n"
    )
    print("\n".join(checks))
    path = write_result(name, "Softmax heads: forward+backward time and memory", body)
    plot(results, os.path.join(RESULTS, f"{name}.png"))
    print(f"wrote {path} and {os.path.join(RESULTS, name + '.png')} after {minutes:.1f} min")


if __name__ == "__main__":
    main()
