"""Model FLOPs utilization (MFU) of training: FLOPs per token from the config, the device's
peak, and the figures each logged training interval reports.

FLOPs per trained token follow PaLM (Chowdhery et al. 2022, appendix B): 6·N for the forward
and backward matmuls, N the weights multiplied per token (every layer's projections and the
output head's rows that training reads: all V for the full softmax, the K + 1 of a sampling
head, a tree's path, a class and its words, the adaptive clusters a target reaches — each head's
`matmul_weights`, expected over the training counts; embedding lookups, norms and biases are
not matmuls), plus 12·L·H·Q·T for
attention scores and values over T keys (H·Q = d_model). The count is dense: a causal or
windowed mask does not lower it (the kernels compute the masked scores too), and work on
padded or packed-padding positions is not counted, so MFU is a lower bound on the hardware's
utilization. An encoder–decoder is counted per target token with its source as long as its
target (both are padded to one bucket length): encoder and decoder layers, cross-attention,
and 12·L·D·T for each of encoder self-, decoder self- and cross-attention.

The peak (`train.peak_tflops`, 0 by default) is, in order: the configured value; the bf16
dense peak of a known accelerator (`KNOWN_PEAKS_TFLOPS`, matched in `device_kind`); or a
float32 matmul measured once on the default device (a CPU's figure).
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

import jax
import jax.numpy as jnp

from seqjax.config import Config
from seqjax.models import is_trained, model_class

# bf16 dense peak TFLOP/s per device, by a substring of jax's device_kind, the first that matches:
# a v5p reports "TPU v5", which a v5e's "TPU v5 lite" holds too, so the v5e's come first.
KNOWN_PEAKS_TFLOPS = {
    "H100": 989.0,
    "H200": 989.0,
    "A100": 312.0,
    "TPU v4": 275.0,
    "TPU v5 lite": 197.0,
    "TPU v5e": 197.0,
    "TPU v5": 459.0,
}


def train_flops_per_token(cfg: Config, head_weights: float, seq_len: int) -> float | None:
    """6·N + attention FLOPs per target token of a train step on rows of seq_len tokens, N the
    model's `matmul_weights` plus the head's `head_weights` (its `matmul_weights`) and the
    attention's as the model counts it (`attention_flops`); None where the model does not count N."""
    if not is_trained(cfg.model):
        return None
    model = model_class(cfg.model)
    weights = model.matmul_weights(cfg.model)
    if weights is None:
        return None
    result: float | None = 6.0 * (weights + head_weights) + model.attention_flops(cfg.model, seq_len)
    return result


def known_peak_tflops(device_kind: str) -> float | None:
    """The bf16 dense peak of a known accelerator whose device_kind names it, else None."""
    for name, peak in KNOWN_PEAKS_TFLOPS.items():
        if name.lower() in device_kind.lower():
            return peak
    return None


def matmul_tflops(size: int = 2048, repeats: int = 5, dtype: Any = jnp.float32) -> float:
    """Median [size, size] x [size, size] matmul throughput of the default device in `dtype`,
    TFLOP/s (the benchmarks' peak, measured beside what they time)."""
    a = jnp.ones((size, size), dtype)
    matmul = jax.jit(lambda x: x @ x)
    matmul(a).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a).block_until_ready()
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e12


@functools.cache
def measured_peak_tflops() -> float:
    """The float32 matmul peak of the default device, TFLOP/s, measured once per process
    (about a second on two CPU cores)."""
    return matmul_tflops()


def peak_tflops(configured: float, device_kind: str) -> float:
    """Per-device peak TFLOP/s: `configured` (train.peak_tflops) when > 0, else the known
    device's, else measured."""
    if configured > 0:
        return configured
    known = known_peak_tflops(device_kind)
    return known if known is not None else measured_peak_tflops()


def interval_metrics(cfg: Config, tokens_per_sec: float, flops_per_token: float | None) -> dict[str, float]:
    """What a logged training interval adds to its global tokens_per_sec: tokens_per_sec_per_device
    and, where the model's FLOPs are counted, model_tflops_per_device and mfu (a fraction).

    flops_per_token: the interval's `train_flops_per_token`, weighted by each step's tokens
    where its batches differ in row length (data.max_tokens); None where N is not counted.
    """
    per_device = tokens_per_sec / jax.device_count()
    metrics = {"tokens_per_sec_per_device": per_device}
    if flops_per_token is not None:
        tflops = per_device * flops_per_token / 1e12
        peak = peak_tflops(cfg.train.peak_tflops, jax.devices()[0].device_kind)
        metrics.update(model_tflops_per_device=tflops, mfu=tflops / peak)
    return metrics
