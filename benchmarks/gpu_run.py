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
step compiled here for the measured device by the code measured, its HLO text kept in --cache),
so that `seqjax compile`'s per-kernel estimate is held against every GPU step measured. `render` joins the
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
import tempfile
import time
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, machine, markdown_table, write_result  # noqa: E402
from llama_shapes import LLAMA, MODELS  # noqa: E402

if TYPE_CHECKING:  # seqjax (and jax) load inside the commands, after the compiler's target is chosen
    from seqjax.config import Config

ROWS = [f"{model}/{kernel}" for model in ("125M", "1B") for kernel in ("xla", "cudnn")]
ROWS_PER_DEVICE = 8
PREDICTED = os.path.join(RESULTS, "gpu_run_predicted.json")
MEASURED = os.path.join(RESULTS, "gpu_run_measured.json")
ROOT = os.path.dirname(os.path.dirname(RESULTS))
CALIBRATION = os.path.join(ROOT, "seqjax", "accelerators", "calibration.json")


def row_config(row: str) -> tuple[Config, int]:
    from seqjax import config as config_lib
    from seqjax.config import Config

    model, kernel = row.split("/")
    layout = ("train.sharding=data", f"train.batch_size={ROWS_PER_DEVICE}", f"model.attention_kernel={kernel}")
    return config_lib.override(Config(), [*LLAMA, *MODELS[model][0], *layout]), MODELS[model][1]


def predict(target_name: str) -> None:
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    import jax

    from seqjax.accelerators.report import compile_report

    found = {}
    for row in ROWS:
        cfg, vocab = row_config(row)
        print("compiling", row, "for", target_name, flush=True)
        report = compile_report(cfg, parse_target(target_name), vocab)
        found[row] = {"target": target_name, "jax": jax.__version__, **report}
    with open(PREDICTED, "w") as f:
        json.dump(found, f, indent=1, default=str)
    print("wrote", PREDICTED)


def measure_row(row: str, steps: int) -> dict:
    """Compiles `row`'s train step on the first device, runs `steps` steps and times each."""
    import jax
    import numpy as np

    from seqjax import optimizers as optim
    from seqjax.accelerators import kernels, program
    from seqjax.accelerators.abstract_run import abstract_batch, build, compile_train
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

    found: dict[str, Any] = {"machine": machine(), "commit": commit(), "rows": {}}
    found["bf16_matmul_tflops"] = matmul_tflops(8192, 10, jax.numpy.bfloat16)
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


COMPILE_TRAIN = """
import sys
sys.path.insert(0, "benchmarks")
from seqjax.accelerators.targets import parse_target, target_devices, use_target_compiler
use_target_compiler()
from gpu_run import row_config
from seqjax.accelerators.abstract_run import abstract_batch, build, compile_train
from seqjax.training.core.layout import make_mesh
cfg, vocab = row_config(sys.argv[1])
mesh = make_mesh(cfg.train.mesh, target_devices(parse_target(sys.argv[2])))
train, _ = compile_train(build(cfg, mesh, vocab), mesh, abstract_batch(cfg, mesh))
open(sys.argv[3], "w").write(train.as_text())
"""


def train_text(row: str, target_name: str, revision: str, cache: str) -> str:
    """The HLO text of `row`'s train step compiled here for `target_name` by the code of `revision`
    (the code measured), kept in `cache` and read from it when there (the 1B rows take minutes)."""
    path = os.path.join(cache, f"{row.replace('/', '_')}_{target_name.replace(':', 'x')}_{revision}.hlo")
    if not os.path.isfile(path):
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory() as code:
            archive = subprocess.run(["git", "archive", revision], capture_output=True, check=True, cwd=ROOT).stdout
            subprocess.run(["tar", "-x", "-C", code], input=archive, check=True)
            print("compiling", row, "for", target_name, "at", revision, flush=True)
            env = {**os.environ, "PYTHONPATH": code}
            subprocess.run([sys.executable, "-c", COMPILE_TRAIN, row, target_name, path], cwd=code, env=env, check=True)
    with open(path) as f:
        return f.read()


def calibration_text(data: dict) -> str:
    """calibration.json's text: indented, each kernel of a step on a line of its own."""
    steps = data["steps"]
    text = json.dumps({**data, "steps": [{**step, "kernels": f"@{i}"} for i, step in enumerate(steps)]}, indent=1)
    for i, step in enumerate(steps):
        text = text.replace(f'"@{i}"', "[\n   " + ",\n   ".join(json.dumps(k) for k in step["kernels"]) + "\n  ]")
    return text + "\n"


def calibrate(target_name: str, cache: str, code: str | None) -> None:
    """The measured rows join calibration.json's steps (replacing earlier records of the same
    row and target), each with the kernels of its program: the device's, or compiled here by the
    code at `code` (default: the commit measured)."""
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
            revision = code or measured["commit"]
            found = kernels.summary(kernels.kernels(train_text(row, target_name, revision, cache)))
            program = f"compiled on a CPU for the target by JAX {jax.__version__}, code at {revision}"
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


def commit() -> str:
    """The repository's commit: the code a measurement ran."""
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return found.stdout.strip() or "unknown"


def gib(count: float) -> str:
    return f"{count / 2**30:.1f}"


def render() -> None:
    from seqjax.accelerators import estimate, kernels
    from seqjax.accelerators.targets import parse_target

    with open(PREDICTED) as f:
        predicted = json.load(f)
    with open(MEASURED) as f:
        measured = json.load(f)
    target = predicted[ROWS[0]]["target"]
    kind, peak = target.split(":")[0], parse_target(target).chip.peak_tflops * 1e12
    steps = {s["row"]: s for s in estimate.calibration_data()["steps"] if s["target"] == target}
    header = ["model", "kernel", "step ms: estimate / measured", "error", "today's code", "MFU: estimate / measured"]
    header += ["tokens/s", "peak GiB: predicted / compiled there / allocator", "fused attn calls", "compile s"]
    table, parts, errors = [], [], []
    for row in ROWS:
        p, m = predicted[row], measured["rows"][row]
        if "error" in m:
            table.append([*row.split("/"), m["error"], "", "", "", "", "", "", ""])
            continue
        seconds = estimate.step_seconds(kernels.from_summary(steps[f"gpu_run {row}"]["kernels"]), kind)
        assert seconds is not None, f"{kind} has no calibration"
        errors.append(seconds["step"] / m["step_seconds"] - 1)
        table.append(
            [
                *row.split("/"),
                f"{1000 * seconds['step']:.0f} / {1000 * m['step_seconds']:.0f}",
                f"{errors[-1]:+.0%}",
                f"{1000 * p['predicted_step_seconds']:.0f}",
                f"{m['model_flops_per_step'] / (seconds['step'] * peak):.0%} / "
                f"{m['model_flops_per_step'] / (m['step_seconds'] * peak):.0%}",
                f"{m['tokens_per_step'] / m['step_seconds']:,.0f}",
                f"{gib(p['per_device_bytes']['peak'])} / {gib(m['compiled_memory']['peak'])} / "
                f"{gib(m['allocator_peak_bytes'])}",
                m["fused_attention_calls"],
                f"{m['compile_seconds']:.0f}",
            ]
        )
        kinds = ("matmul", "attention", "memory", "launch")
        parts.append([*row.split("/"), *(f"{1000 * seconds[f'{k}_seconds']:.1f}" for k in kinds)])
        parts[-1] += [f"{1000 * p['roofline']['step']:.0f}"]
    drift: list[list[object]] = []
    for model in ("125M", "1B"):
        xla, cudnn = measured["rows"][f"{model}/xla"], measured["rows"][f"{model}/cudnn"]
        if "losses" in xla and "losses" in cudnn:
            gaps = [abs(a - b) for a, b in zip(xla["losses"], cudnn["losses"])]
            drift.append([model, f"{xla['losses'][0]:.4f}", f"{cudnn['losses'][0]:.4f}", f"{gaps[0]:.1e}"])
            drift[-1] += [f"{max(gaps):.1e}", f"{xla['losses'][-1]:.4f}", len(gaps)]
    device = next((r["device"] for r in measured["rows"].values() if "device" in r), "?")
    program = steps[f"gpu_run {ROWS[0]}"]["program"]
    body = (
        f"Device: {device}, JAX {measured['machine']['jax']}, code at {measured.get('commit', '?')}; its bf16 "
        f"matmul ran at {measured['bf16_matmul_tflops']:.0f} TFLOP/s (8192³ of ones, median of 10). Measured: the "
        "train step compiled on the device, median of the steps after the first two. Estimate: `seqjax compile`'s "
        f"per-kernel model for `{target}` — each kernel at the matmul rate measured on this H200, the sustained "
        "share of its memory bandwidth and its multiprocessors' elementwise rates, plus a launch cost, one after "
        "another (`seqjax/accelerators/calibration.json` holds the figures and their sources) — of the program "
        f"measured as compiled here ({program}; the device's own compiler may have made a slightly different "
        f"one); today's code: the estimate of the same step compiled by this repository now (JAX "
        f"{predicted[ROWS[0]].get('jax', '?')}). MFU against the chip's {peak / 1e12:.0f} TFLOP/s dense bf16 peak. "
        "Peak memory as `seqjax compile` predicts it today for the target, as the device's compiler sized the "
        "program, and the allocator's high-water mark (parameters and optimizer state included).\n\n"
        + markdown_table(header, table)
        + "\n\nWhere the estimate puts the time (ms; other kernels: fusions without a matmul, bound by their "
        "bytes or, the dropout mask's random bits, by their elementwise instructions), and the roofline bound it "
        "replaced (the model's FLOPs at the dense bf16 peak, or the buffers' bytes at the full bandwidth):\n\n"
        + markdown_table(
            ["model", "kernel", "matmul", "attention", "other kernels", "launches", "roofline bound"], parts
        )
        + "\n\n"
        + f"The estimate is within {max(abs(e) for e in errors):.0%} of the {len(errors)} steps measured "
        f"({min(errors):+.0%} to {max(errors):+.0%}). "
        + ESTIMATE_NOTES
        + "The two kernels from the same parameters and batches (loss at each step):\n\n"
        + markdown_table(["model", "step 1 xla", "step 1 cudnn", "gap step 1", "max gap", "last xla", "steps"], drift)
        + "\n"
    )
    print("wrote", write_result("gpu_run", "Compile report against a real GPU", body, measured["machine"]))


ESTIMATE_NOTES = """Nothing in the model is fitted to these steps; what it leaves out, by what it assumes:

- bf16 matmuls at the rate of one 8192³ product of ones: the 125M model's GEMMs are narrow
  ([16384, 768] by [768, 768 to 2048]) and no GEMM in a training step multiplies ones;
- cuDNN's fused attention at that matmul rate too, its head dim of 64 (125M) included;
- the H200's HBM3e at the 87% of its bandwidth an H100's HBM3 sustains in a copy, for every
  memory-bound fusion — reductions and transposes included;
- 1 µs per kernel launch, XLA's own cost model's figure, with no host time: the XLA-attention rows
  launch 5,000 (125M) and 10,000 (1B) kernels per step.

"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("predict", "measure", "calibrate", "render", "row"))
    parser.add_argument("row", nargs="?", help="with `row`: one of " + ", ".join(ROWS))
    parser.add_argument("--target", default="h200:1")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--cache", default="/tmp/seqjax_gpu_run_hlo", help="with `calibrate`: where HLO texts are kept")
    parser.add_argument(
        "--code", help="with `calibrate`: the commit to compile measured rows at (default: the measured)"
    )
    args = parser.parse_args()
    if args.action == "predict":
        predict(args.target)
    elif args.action == "measure":
        measure(args.steps)
    elif args.action == "calibrate":
        calibrate(args.target, args.cache, args.code)
    elif args.action == "render":
        render()
    else:
        print(json.dumps(measure_row(args.row, args.steps)))


if __name__ == "__main__":
    main()
