"""`gpu_run.py render`: benchmarks/results/gpu_run.md from the measured rows, their predictions and
their estimates — step time and MFU measured against the estimate, peak memory measured against
the prediction, each row's settings and attention, where the estimate puts the time, how far
two kernels' losses drift apart, and the kernels each traced step spent its time in."""

from __future__ import annotations

import collections
import json
from typing import Any

from common import markdown_table, write_result
from gpu_rows import FIRST, parse, plan

DASH = "—"


def gib(count: float | None) -> str:
    return DASH if count is None else f"{count / 2**30:.1f}"


def ordered(names: list[str]) -> list[str]:
    """`names`: the first measurement's rows, then the plan's, then any other."""
    known = [row.name for row in [*FIRST, *plan()]]
    return [n for n in known if n in names] + sorted(n for n in names if n not in known)


SETTINGS = ["model", "kernel", "remat", "stack", "dropout", "packed", "flags"]


def settings(name: str, m: dict[str, Any]) -> list[str]:
    """`SETTINGS`: model, kernel (→ xla where some attention fell back to XLA's), remat (requested
    → policy), the layer stack (scanned or unrolled), dropout, packed, flags."""
    row = parse(name)
    remat = m.get("remat", {}).get("policy", row.remat)
    fallback = (m.get("attention") or {}).get("fallback")
    return [
        row.model,
        f"{row.kernel} → xla" if fallback else row.kernel,
        row.remat if remat == row.remat else f"{row.remat} → {remat}",
        "scanned" if row.scanned else "unrolled",
        "0.1" if row.dropout else "0",
        "yes" if row.packed else "no",
        "on" if row.flags else "off",
    ]


def main_table(rows: dict, predicted: dict, steps: dict, kind: str, peak: float) -> tuple[list, list, list]:
    """The table of every row, the table of where the estimate puts the time, and the errors."""
    from seqjax.accelerators import estimate, kernels

    table, parts, errors = [], [], []
    for name in ordered(list(rows)):
        m, p = rows[name], predicted.get(name)
        head = [*settings(name, m), m["run"].split()[0]]
        if "step_seconds" not in m:
            table.append([*head, m.get("error", "not measured").replace("|", "/"), *[""] * 7])
            continue
        step = steps.get(f"gpu_run {name}")
        seconds = None if step is None else estimate.step_seconds(kernels.from_summary(step["kernels"]), kind)
        flops, measured = m["model_flops_per_step"], m["step_seconds"]
        tokens = m["tokens_per_step"]
        if seconds is not None:
            errors.append(seconds["step"] / measured - 1)
            est = [f"{1000 * seconds['step']:.0f} / {1000 * measured:.0f}", f"{errors[-1]:+.0%}"]
            mfu = f"{flops / (seconds['step'] * peak):.0%} / {flops / (measured * peak):.0%}"
            kinds = ("matmul", "attention", "memory", "launch")
            parts.append([*head[: len(SETTINGS)], *(f"{1000 * seconds[f'{k}_seconds']:.1f}" for k in kinds)])
            parts[-1] += [f"{1000 * p['roofline']['step']:.0f}" if p else DASH]
        else:
            est = [f"{DASH} / {1000 * measured:.0f}", DASH]
            mfu = f"{DASH} / {flops / (measured * peak):.0%}"
        today = f"{1000 * p['predicted_step_seconds']:.0f}" if p and p.get("predicted_step_seconds") else DASH
        memory = f"{gib(p['per_device_bytes']['peak']) if p else DASH} / {gib(m['compiled_memory']['peak'])} / "
        memory += gib(m["allocator_peak_bytes"])
        table.append([*head, *est, today, mfu, f"{tokens / measured:,.0f}", memory, m["fused_attention_calls"]])
        table[-1].append(f"{m['compile_seconds']:.0f}")
    return table, parts, errors


def unmeasured_table(predicted: dict, rows: dict) -> list[list[object]]:
    """The rows predicted for the target but not measured yet: the estimate alone."""
    found: list[list[object]] = []
    for name in ordered([n for n in predicted if n not in rows]):
        p = predicted[name]
        if not p.get("predicted_step_seconds"):
            continue
        remat = (p.get("remat") or {}).get("policy", parse(name).remat)
        fused = p["attention"]["fused_calls_by_step"]["train"]
        found.append([*settings(name, {"remat": {"policy": remat}, "attention": p["attention"]})])
        found[-1] += [f"{1000 * p['predicted_step_seconds']:.0f}", f"{p['predicted_mfu']:.0%}"]
        found[-1] += [gib(p["per_device_bytes"]["peak"]), fused]
    return found


def packed_ratios(predicted: dict) -> str:
    """Each packed row's estimated step against its unpacked twin's, in the order of `ordered`:
    "1B unrolled 1.04x, 125M unrolled 1.06x, 1B scanned with dropout 1.05x"."""
    pairs = []
    for name in ordered(list(predicted)):
        p, twin = predicted[name], predicted.get(name.replace("/packed", ""))
        if "/packed" in name and twin and p.get("predicted_step_seconds") and twin.get("predicted_step_seconds"):
            ratio = p["predicted_step_seconds"] / twin["predicted_step_seconds"]
            row = parse(name)
            stack = ("scanned" if row.scanned else "unrolled") + (" with dropout" if row.dropout else "")
            pairs.append(f"{row.model} {stack} {ratio:.2f}x")
    return ", ".join(pairs)


def drift_table(rows: dict) -> list[list[object]]:
    """Each pair of rows that differ only in the kernel: their losses step by step."""
    found: list[list[object]] = []
    for name in ordered(list(rows)):
        xla = rows[name]
        row = parse(name)
        if row.kernel != "xla" or "losses" not in xla:
            continue
        cudnn = rows.get(name.replace("/xla", "/cudnn", 1), {})
        if "losses" not in cudnn:
            continue
        gaps = [abs(a - b) for a, b in zip(xla["losses"], cudnn["losses"])]
        found.append([name.replace("/xla", ""), f"{xla['losses'][0]:.4f}", f"{cudnn['losses'][0]:.4f}"])
        found[-1] += [f"{gaps[0]:.1e}", f"{max(gaps):.1e}", f"{xla['losses'][-1]:.4f}", len(gaps)]
    return found


def kernel_tables(rows: dict) -> str:
    """Per traced row, the ten kernels that took most of its step."""
    text = []
    for name in ordered(list(rows)):
        trace = rows[name].get("trace")
        if not trace:
            continue
        if "error" in trace:
            text.append(f"`{name}`: no trace ({trace['error']})")
            continue
        step = 1000 * rows[name]["step_seconds"]
        text.append(
            f"`{name}`: step {step:.1f} ms; its kernels {trace['kernel_ms_per_step']:.1f} ms in "
            f"{trace['launches_per_step']:,.0f} launches per step\n"
        )
        table = [
            [k["name"][:90], f"{k['ms_per_step']:.2f}", f"{k['share_of_step']:.1%}", f"{k['launches_per_step']:g}"]
            + [", ".join(k["hlo_ops"])]
            for k in trace["top"]
        ]
        text.append(markdown_table(["kernel", "ms/step", "share", "launches/step", "XLA instructions"], table))
    return "\n\n".join(text)


def programs(rows: dict, steps: dict) -> str:
    """Which programs the calibrated rows' estimates are of: "compiled on the device (JAX 0.11.2): 9 rows; ..."."""
    found = collections.Counter(steps[f"gpu_run {name}"]["program"] for name in rows if f"gpu_run {name}" in steps)
    return "; ".join(f"{program}: {count} rows" for program, count in found.items()) or "none calibrated yet"


def run_line(run: str, r: dict[str, Any]) -> str:
    """A run's line: its key, the device and JAX, and its bf16 matmul rate (or why it has none)."""
    if "bf16_matmul_tflops" not in r:
        return f"- `{run}`: {r.get('error', 'no probe')}"
    device = f"{r['machine']['backend']}, JAX {r['machine']['jax']}"
    return f"- `{run}`: {device}; bf16 matmul {r['bf16_matmul_tflops']:.0f} TFLOP/s (8192³ of ones, median of 10)"


def render(predicted_path: str, measured_path: str) -> None:
    from seqjax.accelerators import estimate
    from seqjax.accelerators.targets import parse_target

    with open(predicted_path) as f:
        predicted = json.load(f)
    with open(measured_path) as f:
        measured = json.load(f)
    target = next(iter(predicted.values()))["target"]
    kind, peak = target.split(":")[0], parse_target(target).chip.peak_tflops * 1e12
    steps = {s["row"]: s for s in estimate.calibration_data()["steps"] if s["target"] == target}
    table, parts, errors = main_table(measured["rows"], predicted, steps, kind, peak)
    runs = measured["runs"]
    lines = [run_line(run, r) for run, r in runs.items()]
    header = [*SETTINGS, "run", "step ms: estimate / measured", "error"]
    header += [
        "today's code",
        "MFU: estimate / measured",
        "tokens/s",
        "peak GiB: predicted / compiled there / allocator",
    ]
    header += ["fused attn calls", "compile s"]
    summary = (
        f"The estimate is within {max(abs(e) for e in errors):.0%} of the {len(errors)} steps measured and calibrated "
        f"({min(errors):+.0%} to {max(errors):+.0%}). "
        if errors
        else "No measured step is in calibration.json yet (`gpu_run.py calibrate`). "
    )
    body = (
        "Runs (a row's `run` is the commit it measured):\n\n"
        + "\n".join(lines)
        + "\n\nMeasured: the train step compiled on the device, the median of the steps after the warm-up ones "
        "(the first run: 10 steps after 2; later runs: 8 after 3), with `model.remat` resolved as `seqjax train` "
        "resolves it for the device's memory (auto → the policy it chose) and the GPU XLA flags of "
        "`seqjax.gpu_flags` on or off. Packed rows: `data.packing` rows of random lines of 64 to 2,048 tokens "
        "(exponential, mean 256 before clipping; 32 lines a row at most); their tokens/s and MFU count targets, "
        "not padding. Estimate: `seqjax compile`'s per-kernel model for "
        f"`{target}` — each kernel at the matmul rate measured on the H200, the sustained share of its memory "
        "bandwidth and its multiprocessors' elementwise rates, plus a launch cost, one after another "
        "(`seqjax/accelerators/calibration.json` holds the figures and their sources) — of the program measured "
        f"({programs(measured['rows'], steps)}); today's code: the estimate of the same step compiled by this "
        "repository now (JAX "
        f"{next(iter(predicted.values())).get('jax', '?')}). MFU against the chip's {peak / 1e12:.0f} TFLOP/s dense "
        "bf16 peak. Peak memory as `seqjax compile` predicts it today for the target, as the device's compiler sized "
        "the program, and the allocator's high-water mark (parameters and optimizer state included).\n\n"
        + markdown_table(header, table)
        + "\n\nWhere the estimate puts the time (ms; other kernels: fusions without a matmul, bound by their "
        "bytes or, the dropout mask's random bits, by their elementwise instructions), and the roofline bound it "
        "replaced (the model's FLOPs at the dense bf16 peak, or the buffers' bytes at the full bandwidth):\n\n"
        + markdown_table(
            [*SETTINGS, "matmul", "attention", "other kernels", "launches"] + ["roofline bound"],
            parts,
        )
        + "\n\n"
        + summary
        + ESTIMATE_NOTES
        + "The two kernels from the same parameters and batches (loss at each step):\n\n"
        + markdown_table(
            ["row", "step 1 xla", "step 1 cudnn", "gap step 1", "max gap", "last xla", "steps"],
            drift_table(measured["rows"]),
        )
        + "\n"
    )
    waiting = unmeasured_table(predicted, measured["rows"])
    if waiting:
        body += (
            "\nRows not measured yet, the estimate alone (the step compiled here for the target by today's code; "
            f"the model's error on the measured steps above is stated there). Packed against unpacked: "
            f"{packed_ratios(predicted) or DASH}.\n\n"
            + markdown_table(
                [*SETTINGS, "step ms: estimate", "MFU: estimate"] + ["peak GiB: predicted", "fused attn calls (train)"],
                waiting,
            )
            + "\n"
        )
    traced = kernel_tables(measured["rows"])
    if traced:
        body += (
            "\nThe ten kernels that took most of each traced row's step (2 steps under `jax.profiler`, by kernel "
            "name; kernels on several streams may overlap):\n\n" + traced + "\n"
        )
    latest = [r["machine"] for r in runs.values() if "machine" in r][-1]
    print("wrote", write_result("gpu_run", "Compile report against a real GPU", body, latest))


ESTIMATE_NOTES = """Nothing in the model is fitted to these steps; what it leaves out, by what it assumes:

- bf16 matmuls at the rate of one 8192³ product of ones: the 125M model's GEMMs are narrow
  ([16384, 768] by [768, 768 to 2048]) and no GEMM in a training step multiplies ones;
- cuDNN's fused attention at that matmul rate too, its head dim of 64 (125M) included;
- the H200's HBM3e at the 87% of its bandwidth an H100's HBM3 sustains in a copy, for every
  memory-bound fusion — reductions and transposes included;
- 1 µs per kernel launch, XLA's own cost model's figure, with no host time: the XLA-attention rows
  launch 5,000 (125M) and 10,000 (1B) kernels per step.

"""
