"""Every softmax head on a GPU: the same numbers as on the host CPU, and its time against the
full softmax and torch.

    python benchmarks/softmax_gpu.py [--vocab 100000,1000000] [--rows 16384] [--out DIR]
    python benchmarks/softmax_gpu.py --render DIR/softmax_gpu.json    # the table again, anywhere

Run where JAX's default backend is a GPU (the host CPU serves as the reference). Two parts:

* agreement: at V = 10k, N = 512, each head's loss and gradients (the cases of
  softmax_cases.py: one jitted value_and_grad, random parameters, Zipfian targets; the sampling
  heads draw from the same keys on both) computed on the GPU and on the host CPU, both at full
  float32 matmul precision (`jax.default_matmul_precision("highest")`): the largest relative
  difference over the loss and every gradient (the norm of the difference over the norm);
* speed: at each `--vocab`, N rows of width D with K samples, every head, the row-gradient
  sampling and tree losses, optax's cross-entropy on materialized logits, and torch's
  `F.cross_entropy` and `AdaptiveLogSoftmaxWithLoss` on the same GPU, at each library's default
  float32 matmul precision (the header names it and the fp32 matmul rate it gives); the median of
  `--repeats` calls timed round-robin after two warm-up calls, with XLA's memory figure of the
  compiled step. A case whose float32 logits would exceed `--memory-limit-gb` is skipped.

Writes DIR/softmax_gpu.md and DIR/softmax_gpu.json (default: benchmarks/results), the JSON
after every group so that a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, interleaved, machine, markdown_table, torch_or_none  # noqa: E402
from softmax_cases import (  # noqa: E402
    ROW_GRADIENT_LOSSES,
    TREE_ROW_GRADIENTS,
    Compiled,
    Shapes,
    adaptive_cutoffs,
    baseline_cases,
    head_configs,
    jax_case,
    make_inputs,
    row_gradient_case,
    tree_row_gradient_case,
)

MATERIALIZING = ("full, materialized", "optax cross-entropy", "torch F.cross_entropy")
# A built case: (blocking call, total bytes, temporary bytes); torch's have no bytes (None).
Built = tuple[Callable[[], object], int | None, int | None]


def builders(
    vocab_size: int, shapes: Shapes, counts: np.ndarray, hidden: jax.Array, targets: jax.Array
) -> dict[str, Callable[[], Compiled]]:
    """{case: () -> (blocking call, total bytes, temporary bytes)} of the JAX cases at one V."""
    cases: dict[str, Callable[[], Compiled]] = {
        name: functools.partial(jax_case, cfg, vocab_size, counts, hidden, targets)
        for name, cfg in head_configs(vocab_size, shapes).items()
    }
    for name in ROW_GRADIENT_LOSSES:
        cases[name] = functools.partial(row_gradient_case, name, vocab_size, shapes, counts, hidden, targets)
    for name in TREE_ROW_GRADIENTS:
        cases[name] = functools.partial(tree_row_gradient_case, name, vocab_size, shapes, counts, hidden, targets)
    cases["optax cross-entropy"] = baseline_cases(vocab_size, shapes, hidden, targets)["optax cross-entropy"]
    return cases


def agreement(vocab_size: int, shapes: Shapes) -> dict[str, float]:
    """{case: largest relative difference of the GPU's loss and gradients from the CPU's}."""
    cpu = jax.devices("cpu")[0]
    found: dict[str, float] = {}
    with jax.default_matmul_precision("highest"):
        counts, hidden, targets = make_inputs(vocab_size, shapes)
        on_gpu = builders(vocab_size, shapes, counts, hidden, targets)
        with jax.default_device(cpu):
            counts, hidden, targets = make_inputs(vocab_size, shapes)
            on_cpu = builders(vocab_size, shapes, counts, hidden, targets)
        for name in on_gpu:
            gpu_out = jax.device_get(on_gpu[name]()[0]())
            with jax.default_device(cpu):
                cpu_out = jax.device_get(on_cpu[name]()[0]())
            found[name] = max(
                _relative(g, c)
                for g, c in zip(jax.tree.leaves(gpu_out), jax.tree.leaves(cpu_out))
                if np.issubdtype(np.asarray(c).dtype, np.floating)
            )
            print(f"agreement {name}: {found[name]:.2e}", flush=True)
    return found


def _relative(got: ArrayLike, want: ArrayLike) -> float:
    want = np.asarray(want, np.float64)
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / max(float(np.linalg.norm(want)), 1e-30))


def torch_builders(
    torch: ModuleType, vocab_size: int, hidden: jax.Array, targets: jax.Array
) -> dict[str, Callable[[], Built]]:
    """torch's full and adaptive softmax on the GPU, forward + backward, synchronized."""
    nn, device = torch.nn, torch.device("cuda")
    features = hidden.shape[1]
    h = torch.tensor(np.asarray(hidden), device=device, requires_grad=True)
    t = torch.tensor(np.asarray(targets), dtype=torch.long, device=device)

    def full() -> Built:
        weights = (0.05 * torch.randn(vocab_size, features, device=device)).requires_grad_()
        biases = torch.zeros(vocab_size, device=device, requires_grad=True)

        def step() -> None:
            h.grad = weights.grad = biases.grad = None
            nn.functional.cross_entropy(h @ weights.T + biases, t).backward()
            torch.cuda.synchronize()

        return step, None, None

    def adaptive() -> Built:
        module = nn.AdaptiveLogSoftmaxWithLoss(features, vocab_size, list(adaptive_cutoffs(vocab_size)), div_value=4.0)
        module = module.to(device)

        def step() -> None:
            h.grad = None
            module.zero_grad(set_to_none=True)
            module(h, t).loss.backward()
            torch.cuda.synchronize()

        return step, None, None

    return {"torch F.cross_entropy": full, "torch AdaptiveLogSoftmaxWithLoss": adaptive}


def speed(
    vocab_size: int, shapes: Shapes, repeats: int, memory_limit: float, torch: ModuleType | None
) -> dict[str, dict[str, Any]]:
    counts, hidden, targets = make_inputs(vocab_size, shapes)
    cases: dict[str, Callable[[], Built]] = dict(builders(vocab_size, shapes, counts, hidden, targets))
    if torch is not None:
        cases.update(torch_builders(torch, vocab_size, hidden, targets))
    logits_bytes = 4 * 3 * shapes.rows * vocab_size  # logits, their gradient, a softmax temporary
    calls: dict[str, Callable[[], object]] = {}
    found: dict[str, dict[str, Any]] = {}
    for name, build in cases.items():
        if name in MATERIALIZING and logits_bytes > memory_limit:
            found[name] = {"skipped": f"[N, V] float32 logits: {logits_bytes / 2**30:.0f} GiB with gradients"}
            continue
        start = time.perf_counter()
        call, total, temporary = build()
        call()
        call()
        found[name] = {"memory_bytes": total, "temporary_bytes": temporary, "first_s": time.perf_counter() - start}
        calls[name] = call
        print(f"V={vocab_size} built {name} in {found[name]['first_s']:.1f} s", flush=True)
    for name, seconds in interleaved(calls, repeats).items():
        found[name]["seconds"] = seconds
        print(f"V={vocab_size} {name}: {seconds * 1e3:.2f} ms", flush=True)
    return found


def matmul_rate(precision: str | None, size: int = 8192, repeats: int = 10) -> float:
    """TFLOP/s of an fp32 [size, size] matmul at `precision` (None: JAX's default), on random
    data as a training step's are (`seqjax.training.core.mfu.matmul_tflops` multiplies ones)."""
    a = jnp.asarray(np.random.default_rng(0).normal(size=(size, size)), jnp.float32)
    with jax.default_matmul_precision(precision) if precision else contextlib.nullcontext():
        product = jax.jit(lambda x: x @ x).lower(a).compile()
    seconds = interleaved({"matmul": lambda: product(a).block_until_ready()}, repeats, warm_up=True)["matmul"]
    return 2 * size**3 / seconds / 1e12


def render(report: dict[str, Any]) -> str:
    shapes = report["shapes"]
    lines = [
        "# Softmax heads on a GPU",
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in report["machine"].items()),
        "",
        f"float32 matmul 8192^3: {report['fp32_default_tflops']:.0f} TFLOP/s at JAX's default precision, "
        f"{report['fp32_highest_tflops']:.0f} at 'highest'; torch: {report['torch_precision']}. "
        f"N = {shapes['rows']} rows, D = {shapes['features']}, K = {shapes['samples']} samples, targets Zipfian; "
        f"one jitted value_and_grad with respect to the hidden states and every parameter (the row-gradient "
        f"cases: with respect to the rows they read), the median of {report['repeats']} calls timed round-robin "
        f"after two warm-up calls; memory from XLA's memory_analysis of the compiled step. Written by "
        f"benchmarks/softmax_gpu.py in {report['minutes']:.1f} min.",
        "",
        "## The same numbers as the CPU",
        "",
        f"V = {report['agreement_vocab']:,}, N = {report['agreement_rows']}: the largest relative difference "
        "between the GPU's and the host CPU's loss and gradients, both at 'highest' matmul precision.",
        "",
        markdown_table(["case", "GPU vs CPU"], [[k, f"{v:.1e}"] for k, v in report["agreement"].items()]),
        "",
        "## Time",
    ]
    for vocab, found in report["speed"].items():
        full = found.get("full", {}).get("seconds")
        rows = []
        for name, entry in found.items():
            if "skipped" in entry:
                rows.append([name, "skipped", "", entry["skipped"]])
                continue
            seconds = entry["seconds"]
            memory = "" if entry["memory_bytes"] is None else f"{entry['memory_bytes'] / 2**20:,.0f}"
            rows.append([name, f"{seconds * 1e3:.2f} ms", f"{full / seconds:.1f}x" if full else "", memory])
        lines += ["", f"### V = {int(vocab):,}", "", markdown_table(["case", "time", "full / this", "MiB"], rows)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="100000,1000000")
    Shapes.add_arguments(parser)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--memory-limit-gb", type=float, default=100.0)
    parser.add_argument("--agreement-vocab", type=int, default=10_000)
    parser.add_argument("--agreement-rows", type=int, default=512)
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--render", metavar="JSON", help="only write softmax_gpu.md from a run's softmax_gpu.json")
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            saved: dict[str, Any] = json.load(f)
        with open(os.path.join(args.out, "softmax_gpu.md"), "w") as f:
            f.write(render(saved))
        return
    if jax.default_backend() != "gpu":
        raise SystemExit(f"softmax_gpu.py needs a GPU as JAX's default backend, got {jax.default_backend()}")
    began = time.perf_counter()
    torch = torch_or_none()
    shapes = Shapes.parsed(args)
    report: dict[str, Any] = {
        "machine": machine(),
        "shapes": {"rows": shapes.rows, "features": shapes.features, "samples": shapes.samples},
        "repeats": args.repeats,
        "fp32_default_tflops": matmul_rate(None),
        "fp32_highest_tflops": matmul_rate("highest"),
        "torch_precision": "not installed"
        if torch is None
        else f"float32 matmul precision '{torch.get_float32_matmul_precision()}'",
        "agreement_vocab": args.agreement_vocab,
        "agreement_rows": args.agreement_rows,
        "speed": {},
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "softmax_gpu.json")

    def save() -> None:
        report["minutes"] = (time.perf_counter() - began) / 60
        with open(path, "w") as f:
            json.dump(report, f, indent=1, default=str)

    report["agreement"] = agreement(args.agreement_vocab, Shapes(args.agreement_rows, 64, 128))
    save()
    for vocab in (int(v) for v in args.vocab.split(",")):
        report["speed"][str(vocab)] = speed(vocab, shapes, args.repeats, args.memory_limit_gb * 2**30, torch)
        save()
    with open(os.path.join(args.out, "softmax_gpu.md"), "w") as f:
        f.write(render(report))
    print("wrote", path, "and softmax_gpu.md", flush=True)


if __name__ == "__main__":
    main()
