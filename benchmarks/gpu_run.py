"""`seqjax compile`'s prediction held against a real GPU: Llama-shaped LMs of 125M and 1B
parameters (benchmarks/llama_shapes.py), 8 rows of 2,048 tokens, AdamW, trained for a few steps
on one GPU with each attention kernel (XLA's, and cuDNN's fused one).

    python benchmarks/gpu_run.py predict [--target h200:1]   # on any machine: compiles for the target
    python benchmarks/gpu_run.py measure [--steps 12]        # on the machine with the GPU
    python benchmarks/gpu_run.py calibrate [--cache DIR]     # the measured steps join the estimate's check
    python benchmarks/gpu_run.py render                      # benchmarks/results/gpu_run.md

`predict` writes benchmarks/results/gpu_run_predicted.json: each row's compile report for the
target, made on this machine's CPU. `measure` runs each row in a process of its own (so that the
allocator's peak is the row's own) and writes gpu_run_measured.json: the step compiled on the
real device and run from the same parameters and batches under each kernel, with the kernels of
that program. `calibrate` writes the measured steps into seqjax/accelerators/calibration.json,
each with the kernels of its program (the device's where the measurement recorded them, else the
step compiled here for the measured device, its HLO text kept in --cache), so that `seqjax
compile`'s per-kernel estimate is held against every GPU step measured. `render` joins the
predictions and the measurements: step time and MFU measured against the estimate, peak memory
measured against the prediction, the fused attention calls found, and how far the two kernels'
losses drift apart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, machine, markdown_table, write_result  # noqa: E402
from llama_shapes import LLAMA, MODELS  # noqa: E402

ROWS = [f"{model}/{kernel}" for model in ("125M", "1B") for kernel in ("xla", "cudnn")]
ROWS_PER_DEVICE = 8
PREDICTED = os.path.join(RESULTS, "gpu_run_predicted.json")
MEASURED = os.path.join(RESULTS, "gpu_run_measured.json")
CALIBRATION = os.path.join(os.path.dirname(RESULTS), "..", "seqjax", "accelerators", "calibration.json")


def row_config(row: str):
    from seqjax import config as config_lib
    from seqjax.config import Config

    model, kernel = row.split("/")
    layout = ("train.sharding=data", f"train.batch_size={ROWS_PER_DEVICE}", f"model.attention_kernel={kernel}")
    return config_lib.override(Config(), [*LLAMA, *MODELS[model][0], *layout]), MODELS[model][1]


def predict(target_name: str) -> None:
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    from seqjax.accelerators.report import compile_report

    found = {}
    for row in ROWS:
        cfg, vocab = row_config(row)
        print("compiling", row, "for", target_name, flush=True)
        found[row] = {"target": target_name, **compile_report(cfg, parse_target(target_name), vocab)}
    with open(PREDICTED, "w") as f:
        json.dump(found, f, indent=1, default=str)
    print("wrote", PREDICTED)


def measure_row(row: str, steps: int) -> dict:
    """Compiles `row`'s train step on the first device, runs `steps` steps and times each."""
    import jax
    import numpy as np

    from seqjax.accelerators import kernels, program
    from seqjax.accelerators.abstract_run import abstract_batch, build, compile_train
    from seqjax.training.core import optim
    from seqjax.training.core.layout import batch_sharding, make_mesh
    from seqjax.training.core.mfu import train_flops_per_token
    from seqjax.training.core.state import init_state

    cfg, vocab = row_config(row)
    start = time.perf_counter()
    mesh = make_mesh(cfg.train.mesh, jax.devices()[:1])
    parts, shapes = build(cfg, mesh, vocab), abstract_batch(cfg, mesh)
    train, _ = compile_train(parts, mesh, shapes)
    compile_seconds = time.perf_counter() - start
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    state = init_state(parts.model, parts.head, optimizer, cfg.train.seed, shapes, mesh, cfg.train.sharding)
    rows, length = shapes["mask"].shape
    rng = np.random.default_rng(0)  # the same batches for every row of a model
    losses, seconds = [], []
    for _ in range(steps):
        ids = rng.integers(4, vocab, size=(rows, length + 1), dtype=np.int32)
        batch = {"inputs": ids[:, :-1], "targets": ids[:, 1:], "mask": np.ones((rows, length), np.float32)}
        batch = jax.device_put(batch, batch_sharding(mesh))
        jax.block_until_ready(batch)
        begin = time.perf_counter()
        state, metrics = train(state, batch)
        losses.append(float(metrics["loss"]))  # waits for the step
        seconds.append(time.perf_counter() - begin)
    head_weights = parts.head.matmul_weights(cfg.model.d_model, parts.counts)
    device = jax.devices()[0]
    return {
        "device": device.device_kind,
        "jax": jax.__version__,
        "compile_seconds": compile_seconds,
        "step_seconds": statistics.median(seconds[2:]),
        "step_seconds_all": seconds,
        "losses": losses,
        "model_flops_per_step": train_flops_per_token(cfg, head_weights, length) * rows * length,
        "tokens_per_step": rows * length,
        "fused_attention_calls": program.fused_attention_calls(train.as_text())["cudnn"],
        "kernels": kernels.summary(kernels.kernels(train.as_text())),
        "compiled_memory": program.memory(train),
        "allocator_peak_bytes": (device.memory_stats() or {}).get("peak_bytes_in_use"),  # None on a CPU
    }


def measure(steps: int) -> None:
    import jax

    from seqjax.training.core.mfu import matmul_tflops

    found = {"machine": machine(), "bf16_matmul_tflops": matmul_tflops(8192, 10, jax.numpy.bfloat16), "rows": {}}
    for row in ROWS:
        print("measuring", row, flush=True)
        done = subprocess.run(
            [sys.executable, __file__, "row", row, "--steps", str(steps)], capture_output=True, text=True, check=False
        )
        if done.returncode:
            found["rows"][row] = {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
            print(done.stderr[-3000:], flush=True)
        else:
            found["rows"][row] = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(found["rows"][row])[:600], flush=True)
    with open(MEASURED, "w") as f:
        json.dump(found, f, indent=1)
    print("wrote", MEASURED)


def train_text(row: str, target_name: str, cache: str) -> str:
    """The HLO text of `row`'s train step compiled here for `target_name`, kept in `cache` (and
    read from it when there: the 1B rows take minutes of CPU)."""
    path = os.path.join(cache, f"{row.replace('/', '_')}_{target_name.replace(':', 'x')}.hlo")
    if os.path.isfile(path):
        with open(path) as f:
            return f.read()
    from seqjax.accelerators.targets import parse_target, target_devices, use_target_compiler

    use_target_compiler()
    from seqjax.accelerators.abstract_run import abstract_batch, build, compile_train
    from seqjax.training.core.layout import make_mesh

    cfg, vocab = row_config(row)
    mesh = make_mesh(cfg.train.mesh, target_devices(parse_target(target_name)))
    print("compiling", row, "for", target_name, flush=True)
    train, _ = compile_train(build(cfg, mesh, vocab), mesh, abstract_batch(cfg, mesh))
    text = train.as_text()
    os.makedirs(cache, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return text


def calibration_text(data: dict) -> str:
    """calibration.json's text: indented, each kernel of a step on a line of its own."""
    steps = data["steps"]
    text = json.dumps({**data, "steps": [{**step, "kernels": f"@{i}"} for i, step in enumerate(steps)]}, indent=1)
    for i, step in enumerate(steps):
        text = text.replace(f'"@{i}"', "[\n   " + ",\n   ".join(json.dumps(k) for k in step["kernels"]) + "\n  ]")
    return text + "\n"


def calibrate(target_name: str, cache: str) -> None:
    """The measured rows join calibration.json's steps (replacing earlier records of the same
    row and target), each with the kernels of its program."""
    import jax

    from seqjax.accelerators import kernels

    with open(MEASURED) as f:
        measured = json.load(f)
    with open(CALIBRATION) as f:
        data = json.load(f)
    recorded = {(step["row"], step["target"]): step for step in data["steps"]}
    for row in ROWS:
        m = measured["rows"][row]
        if "step_seconds" not in m:
            continue
        if "kernels" in m:
            found, program = m["kernels"], f"compiled on the device (JAX {m['jax']})"
        else:
            found = kernels.summary(kernels.kernels(train_text(row, target_name, cache)))
            program = f"compiled on a CPU for the target (JAX {jax.__version__})"
        recorded[(f"gpu_run {row}", target_name)] = {
            "row": f"gpu_run {row}",
            "target": target_name,
            "device": m["device"],
            "jax": m["jax"],
            "step_seconds": m["step_seconds"],
            "source": "benchmarks/results/gpu_run_measured.json",
            "program": program,
            "kernels": found,
        }
    data["steps"] = list(recorded.values())
    with open(CALIBRATION, "w") as f:
        f.write(calibration_text(data))
    print("wrote", os.path.normpath(CALIBRATION))


def gib(count: float) -> str:
    return f"{count / 2**30:.1f}"


def render() -> None:
    from seqjax.accelerators.targets import parse_target

    with open(PREDICTED) as f:
        predicted = json.load(f)
    with open(MEASURED) as f:
        measured = json.load(f)
    header = ["model", "kernel", "step ms: estimate / measured", "MFU: estimate / measured", "tokens/s"]
    header += ["peak GiB: predicted / compiled there / allocator", "fused attn calls", "compile s"]
    table = []
    for row in ROWS:
        p, m = predicted[row], measured["rows"][row]
        if "error" in m:
            table.append([*row.split("/"), m["error"], "", "", "", "", ""])
            continue
        peak_tflops = parse_target(p["target"]).chip.peak_tflops
        mfu = m["model_flops_per_step"] / (m["step_seconds"] * peak_tflops * 1e12)
        table.append(
            [
                *row.split("/"),
                f"{1000 * p['predicted_step_seconds']:.0f} / {1000 * m['step_seconds']:.0f}",
                f"{100 * p['predicted_mfu']:.0f}% / {100 * mfu:.0f}%",
                f"{m['tokens_per_step'] / m['step_seconds']:,.0f}",
                f"{gib(p['per_device_bytes']['peak'])} / {gib(m['compiled_memory']['peak'])} / "
                f"{gib(m['allocator_peak_bytes'])}",
                m["fused_attention_calls"],
                f"{m['compile_seconds']:.0f}",
            ]
        )
    drift = []
    for model in ("125M", "1B"):
        xla, cudnn = measured["rows"][f"{model}/xla"], measured["rows"][f"{model}/cudnn"]
        if "losses" in xla and "losses" in cudnn:
            gaps = [abs(a - b) for a, b in zip(xla["losses"], cudnn["losses"])]
            drift.append([model, f"{xla['losses'][0]:.4f}", f"{cudnn['losses'][0]:.4f}", f"{gaps[0]:.1e}"])
            drift[-1] += [f"{max(gaps):.1e}", f"{xla['losses'][-1]:.4f}", len(gaps)]
    device = next((r["device"] for r in measured["rows"].values() if "device" in r), "?")
    body = (
        f"Device: {device}, JAX {measured['machine']['jax']}; its bf16 matmul ran at "
        f"{measured['bf16_matmul_tflops']:.0f} TFLOP/s (8192³, median of 10). Estimates: `seqjax compile` for "
        f"`{predicted[ROWS[0]]['target']}` on a CPU (the roofline bound; MFU against the chip's "
        f"{parse_target(predicted[ROWS[0]]['target']).chip.peak_tflops:.0f} TFLOP/s dense bf16 peak); "
        "measured: the same train step compiled on the device, median of the steps after the first two; peak "
        "memory as predicted for the target, as the device's compiler sized the program, and the allocator's "
        "high-water mark (parameters and optimizer state included).\n\n"
        + markdown_table(header, table)
        + "\n\nThe two kernels from the same parameters and batches (loss at each step):\n\n"
        + markdown_table(["model", "step 1 xla", "step 1 cudnn", "gap step 1", "max gap", "last xla", "steps"], drift)
        + "\n"
    )
    print("wrote", write_result("gpu_run", "Compile report against a real GPU", body, measured["machine"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("predict", "measure", "calibrate", "render", "row"))
    parser.add_argument("row", nargs="?", help="with `row`: one of " + ", ".join(ROWS))
    parser.add_argument("--target", default="h200:1")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--cache", default="/tmp/seqjax_gpu_run_hlo", help="with `calibrate`: where HLO texts are kept")
    args = parser.parse_args()
    if args.action == "predict":
        predict(args.target)
    elif args.action == "measure":
        measure(args.steps)
    elif args.action == "calibrate":
        calibrate(args.target, args.cache)
    elif args.action == "render":
        render()
    else:
        print(json.dumps(measure_row(args.row, args.steps)))


if __name__ == "__main__":
    main()
