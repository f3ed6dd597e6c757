"""Single-device training throughput and model FLOP utilization (MFU) of a Transformer LM.

    python benchmarks/mfu.py [--quick] [--precision bfloat16] [--peak-tflops P] [--repeats 5] [--steps 5]

The library's jitted train step (teacher forcing, full softmax, AdamW) of a mid-size
decoder-only Transformer on random tokens, on the first device JAX sees (a GPU when one is
there). MFU = model FLOPs per second / peak, with the model FLOPs of the PaLM paper's count
(6 per parameter-multiply per token for forward + backward, plus 12·L·T·D for attention
scores and values; embedding lookups and elementwise work not counted, so MFU is a lower
bound on the hardware's utilization). Two peaks: the matmul throughput this process
measures in the run's dtype (always), and `--peak-tflops`, the chip's nominal dense peak
(e.g. 989 for an H100 SXM in bf16), when given.

Writes benchmarks/results/mfu.md (`--quick`: tiny shapes, mfu_quick.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    LMShapes,
    add_timing_arguments,
    lm_train_step,
    machine,
    markdown_table,
    matmul_peak,
    publish,
    timing,
    transformer_lm,
)

from seqjax.training.core.experiment import PRECISIONS  # noqa: E402

# ~0.2B parameters (GPT-2 medium's body at 16 layers of 1024): large enough for a GPU's matmul
# units to be busy, small enough for one 80 GB device with AdamW in float32.
FULL = transformer_lm(16, 1024, 32_768, d_model=1024, layers=16, heads=16)
QUICK = transformer_lm(4, 32, 512, d_model=64, layers=2, heads=4)


def train_flops_per_token(shapes: LMShapes) -> float:
    """Forward + backward matmul FLOPs per token: 6 · (per-layer weights · L + output layer) + 12·L·T·D.

    Per layer: Q, K, V and output projections (4·D²) and the MLP (2·D·F); attention scores and
    values over all T keys (the causal mask does not skip work in a dense kernel).
    """
    m = shapes.model
    weights = m.layers * (4 * m.d_model**2 + 2 * m.d_model * m.d_ff) + m.d_model * shapes.vocab
    return 6.0 * weights + 12.0 * m.layers * shapes.time * m.d_model


def measure(shapes: LMShapes, precision: str, repeats: int, steps: int) -> dict:
    run, params = lm_train_step(shapes, PRECISIONS[precision])
    run(2)  # compile, warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        times.append(time.perf_counter() - start)
    step_s = statistics.median(times) / steps
    tokens_per_s = shapes.batch * shapes.time / step_s
    return {
        "params": params,
        "step_s": step_s,
        "tokens_per_s": tokens_per_s,
        "model_tflops": tokens_per_s * train_flops_per_token(shapes) / 1e12,
    }


def report(
    shapes: LMShapes,
    precision: str,
    result: dict,
    measured_peak: float,
    nominal_peak: float | None,
    peak_size: int = 4096,
) -> str:
    m = shapes.model
    rows = [
        [
            f"B={shapes.batch} T={shapes.time} D={m.d_model} L={m.layers} H={m.num_heads} F={m.d_ff} V={shapes.vocab}",
            f"{result['params']:,}",
            precision,
            f"{result['step_s'] * 1000:,.1f}",
            f"{result['tokens_per_s']:,.0f}",
            f"{result['model_tflops']:.2f}",
            f"{result['model_tflops'] / measured_peak:.0%}",
            f"{result['model_tflops'] / nominal_peak:.0%}" if nominal_peak else "-",
        ]
    ]
    header = [
        "shape",
        "parameters",
        "matmuls",
        "ms / step",
        "tokens/s",
        "model TFLOP/s",
        "MFU (measured peak)",
        "MFU (nominal peak)",
    ]
    device = jax.devices()[0]
    peaks = f"measured {precision} matmul peak {measured_peak:.3g} TFLOP/s ({peak_size}³, median of 7)"
    if nominal_peak:
        peaks += f"; nominal peak given {nominal_peak:g} TFLOP/s"
    return (
        f"Device: {device.platform} ({device.device_kind}); {peaks}. Model FLOPs per token "
        f"{train_flops_per_token(shapes) / 1e6:,.1f} MFLOP (PaLM count, forward + backward); parameters and "
        f"softmax in float32, model matmuls in {precision}.\n\n{markdown_table(header, rows)}\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timing_arguments(parser, default_steps=5)
    parser.add_argument("--precision", default="bfloat16", choices=sorted(PRECISIONS))
    parser.add_argument("--peak-tflops", type=float, default=None, help="the chip's nominal dense peak, TFLOP/s")
    args = parser.parse_args(argv)
    repeats, steps = timing(args, default_steps=5)
    if args.peak_tflops is not None and args.peak_tflops <= 0:
        raise ValueError(f"--peak-tflops must be > 0, got {args.peak_tflops}")
    shapes = QUICK if args.quick else FULL
    print("machine:", machine())
    peak_size = 512 if args.quick else 4096
    measured_peak = matmul_peak(peak_size, dtype=PRECISIONS[args.precision]) / 1000
    result = measure(shapes, args.precision, repeats, steps)
    body = report(shapes, args.precision, result, measured_peak, args.peak_tflops, peak_size)
    print(body)
    publish("mfu", args.quick, "Single-device training throughput and MFU: Transformer LM", body)


if __name__ == "__main__":
    main()
