"""The targets the softmax benchmark (softmax.py) checks at one vocabulary size, each stated with
its measurement, the value of each run, whether it holds and the floor measured for it; and the
names of the cases they read."""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Collection

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_cases import (  # noqa: E402
    ADAPTIVE_CAPACITIES,
    HUFFMAN_ROWS,
    RECOMPUTING,
    TOP_LEVELS,
    Shapes,
    deep_path_lengths,
    make_inputs,
)

PEAK = "fp32 matmul 2048^3 (the peak, timed with the cases)"
PEAK_SIZE = 2048
FULL_PRODUCTS = "full: its 3 matmuls alone"
FULL_FLOOR = "full: its 3 matmuls and an exponential per logit (floor)"
SAMPLED_FLOOR = "sampled / NCE rows: 3 [N, D] x [D, K] products alone (floor)"
HUFFMAN_FLOOR = "tree, Huffman, row gradients: top products + deep gathers alone (floor)"
ADAPTIVE_FLOOR = "adaptive, tail capacities: its products and an exponential per score (floor)"

# One case at one V: (median seconds or None, total bytes or None, temp bytes or None, note).
Result = tuple[float | None, int | None, int | None, str]
Results = dict[int, dict[str, Result]]  # {V: {name: result}}
PerRun = dict[int, dict[str, list[float]]]  # {V: {name: [seconds of each run]}}


def target_vocab(vocab_sizes: Collection[int]) -> int:
    """The V the targets are checked at: 100k where it was measured, else the largest."""
    return 100_000 if 100_000 in vocab_sizes else max(vocab_sizes)


SAMPLED_ROWS = "sampled (log-uniform), row gradients"
NCE_ROWS = "NCE (log-uniform), row gradients"
SLOPE_CASES = (
    SAMPLED_ROWS,
    NCE_ROWS,
    "negative (unigram^0.75), row gradients",
    "tree, Huffman, row gradients",
    "tree, balanced, row gradients",
)


def target_checks(results: Results, per_run: PerRun, peak: float, shapes: Shapes) -> list[str]:
    """The targets at V = 100k (or the largest V measured), each with its measurement (the median
    over the runs, and each run's value), whether it holds, and the floor measured for it; the
    log-log slope of time against V of the row-gradient cases."""
    vocab_size = target_vocab(results)
    row, runs = results[vocab_size], per_run[vocab_size]

    def seconds(name: str) -> float | None:
        return row.get(name, (None,))[0]

    def ratio(over: str, name: str) -> tuple[float, list[float]] | None:
        """(median, per-run values) of runs[over] / runs[name]; None when either is missing."""
        if over not in runs or name not in runs:
            return None
        values = [a / b for a, b in zip(runs[over], runs[name])]
        return statistics.median(values), values

    def verdict(value: float, wanted: float) -> str:
        return "met" if value >= wanted else "**missed**"

    def each(values: list[float], fmt: str) -> str:
        return ", ".join(fmt.format(v) for v in values)

    flops = 6.0 * shapes.rows * shapes.features * vocab_size
    lines = [f"Targets at V = {vocab_size:,} (median over the runs; each run's value in brackets):"]

    def peak_shares(name: str) -> list[float]:
        """Each run's share of the peak timed in that same run (the one at the start where it was not)."""
        peaks = [2.0 * PEAK_SIZE**3 / t / 1e9 for t in runs[PEAK]] if PEAK in runs else [peak] * len(runs[name])
        return [flops / t / 1e9 / p for t, p in zip(runs[name], peaks)]

    if "full" in runs:
        shares = peak_shares("full")
        share = statistics.median(shares)
        line = (
            f"- full softmax >= 80% of the matmul peak: {share:.0%} [{each(shares, '{:.0%}')}] ({verdict(share, 0.8)})"
        )
        if PEAK in runs:
            peaks = [2.0 * PEAK_SIZE**3 / t / 1e9 for t in runs[PEAK]]
            line += f" (the peak timed with it: {each(peaks, '{:.0f}')} GFLOP/s)"
        if FULL_FLOOR in runs:
            floor = statistics.median(peak_shares(FULL_FLOOR))
            products = statistics.median(peak_shares(FULL_PRODUCTS))
            line += (
                f"; floor: its 3 matmuls with an exponential per logit run at {floor:.0%} of the peak "
                f"(the 3 matmuls alone at {products:.0%})"
            )
        lines.append(line)
    optax = ratio("optax cross-entropy", "full")
    if optax:
        lines.append(
            f"- full softmax >= 1.3x optax: {optax[0]:.2f}x [{each(optax[1], '{:.2f}x')}] ({verdict(optax[0], 1.3)})"
        )
    materialized, lean = row.get("full, materialized", (None,) * 3), row.get(RECOMPUTING, row["full"])
    full_total = row["full"][1]
    if materialized[2] and lean[2] and materialized[1] and lean[1] and full_total:  # both compiled: all known
        fewer = materialized[2] / lean[2]
        lines.append(
            f"- full softmax (recomputing blocks) with >= 10x fewer temporaries than materialized logits: {fewer:.1f}x "
            f"({verdict(fewer, 10)}; total memory {materialized[1] / lean[1]:.1f}x less; the default, keeping "
            f"each block's float32 exponentials: {full_total / 2**20:,.0f} MiB in all)"
        )
    floors = {HUFFMAN_ROWS: HUFFMAN_FLOOR, SAMPLED_ROWS: SAMPLED_FLOOR, NCE_ROWS: SAMPLED_FLOOR}
    for name, wanted in (("class (sqrt V classes)", 10), (HUFFMAN_ROWS, 200), (SAMPLED_ROWS, 100), (NCE_ROWS, 100)):
        speedup = ratio("full", name)
        if speedup:
            line = (
                f"- {name} >= {wanted}x faster than full: {speedup[0]:.1f}x [{each(speedup[1], '{:.1f}x')}] "
                f"({verdict(speedup[0], wanted)})"
            )
            floor_ratio = ratio("full", floors.get(name, ""))
            if floor_ratio:
                line += f"; full / its floor alone: {floor_ratio[0]:.1f}x"
            if floors.get(name) == SAMPLED_FLOOR:  # both do three products, over V and over K words
                line += f" (FLOPs: V / K = {vocab_size / shapes.samples:.1f}x fewer than the full's)"
            if name == HUFFMAN_ROWS:
                counts, _, targets = make_inputs(vocab_size, shapes)
                mean, longest = deep_path_lengths(name, vocab_size, counts, targets)
                line += f"; path steps below the top {TOP_LEVELS} levels: mean {mean:.2f}, max {longest}"
            lines.append(line)
    for name in ("adaptive (div 4)", ADAPTIVE_CAPACITIES):
        adaptive = ratio("torch AdaptiveLogSoftmaxWithLoss", name)
        if adaptive:
            line = (
                f"- {name} >= 1.5x faster than torch's AdaptiveLogSoftmaxWithLoss: {adaptive[0]:.2f}x "
                f"[{each(adaptive[1], '{:.2f}x')}] ({verdict(adaptive[0], 1.5)})"
            )
            floor_ratio = ratio("torch AdaptiveLogSoftmaxWithLoss", ADAPTIVE_FLOOR)
            if floor_ratio and name == ADAPTIVE_CAPACITIES:
                line += f"; torch / the floor alone: {floor_ratio[0]:.2f}x"
            lines.append(line)
    vocab_sizes = sorted(results)
    if len(vocab_sizes) > 1:
        low, high = vocab_sizes[0], vocab_sizes[-1]
        for name in SLOPE_CASES:
            low_seconds, high_seconds = results[low].get(name, (None,))[0], results[high].get(name, (None,))[0]
            if low_seconds and high_seconds:
                slope = np.log(high_seconds / low_seconds) / np.log(high / low)
                lines.append(
                    f"- {name}: log-log slope of time against V = {low:,} -> {high:,} <= 0.2: "
                    f"{slope:.2f} ({'met' if slope <= 0.2 else '**missed**'})"
                )
    return lines
