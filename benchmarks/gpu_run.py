"""`seqjax compile`'s prediction held against a real GPU: Llama-shaped LMs of 125M and 1B
parameters (benchmarks/llama_shapes.py), 8 rows of 2,048 tokens, bf16, AdamW, trained for a few
steps on one GPU under the settings of benchmarks/gpu_rows.py.

On a machine with one GPU, in the repository's root, the whole measurement is one command (about
7 minutes on an H200 by the rows' estimates):

    python benchmarks/gpu_run.py measure

(`bash benchmarks/gpu_session.sh` runs it on a machine without network whose Python lacks some of
seqjax's requirements, installing them from wheels brought along.) Then, on any machine:

    python benchmarks/gpu_run.py plan                        # the rows and what each costs
    python benchmarks/gpu_run.py predict [--target h200:1]   # compiles each row for the target
    python benchmarks/gpu_run.py calibrate [--cache DIR]     # the measured steps join the estimate's check
    python benchmarks/gpu_run.py render                      # benchmarks/results/gpu_run.md

The rows (`gpu_rows.plan`, most valuable first, with each one's estimate on an H200: process
start 10 s, compile, state 3-6 s, 13 steps, trace 8 s): per model the baseline `seqjax train`
runs (cuDNN attention, remat auto, unpacked, GPU flags on, layers unrolled, no dropout; 1B 57 s,
125M 46 s), then one setting changed at a time, 1B then 125M: packed rows (57, 46 s), remat full
(57, 46 s), flags off (57, 46 s), the scanned stack (43, 34 s). The bf16 matmul probe first (15
s). In all about 500 s of the 540 s budget (`--budget`); XLA's attention (79 s at 125M, 94 s at
1B) is left out, and the first measurement has it. Packed rows hold at most 32
segments (`data.max_segments`), which cuDNN's packed layout needs. A row whose estimate
no longer fits is not started, one past twice its estimate is cut off; `--rows` names others.

`measure` runs each row in a process of its own (`gpu_measure`) and writes it into
benchmarks/results/gpu_run_measured.json as soon as it is done, beside the rows measured before:
the step compiled on the device (remat auto resolved for its memory) and timed (median of 8
after 3 warm-up steps), tokens/s, MFU (`seqjax.training.core.mfu`), the allocator's peak, the
kernels of the program (for `calibrate`), the fused attention calls and the ten kernels that
took most of 2 traced steps (`gpu_trace`). `predict` writes gpu_run_predicted.json: each row's
compile report for the target made on this machine's CPU, without the GPU flags (as `seqjax
compile` makes it). `calibrate` writes the measured steps into
seqjax/accelerators/calibration.json with the kernels of their programs, so that `seqjax
compile`'s per-kernel estimate is held against every GPU step measured. `render` joins them.

For the tests alone, the environment variable GPU_RUN_SET adds `--set` overrides (space
separated) to every row's config: tiny shapes that run on a CPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, machine  # noqa: E402
from gpu_measure import child, measure_row, names, run_rows, write  # noqa: E402
from gpu_rows import BUDGET_SECONDS, FIRST, PROBE_SECONDS, Row, parse, plan, planned_seconds  # noqa: E402

if TYPE_CHECKING:  # seqjax (and jax) load inside the commands, after the compiler's target is chosen
    from seqjax.config import Config

PREDICTED = os.path.join(RESULTS, "gpu_run_predicted.json")
MEASURED = os.path.join(RESULTS, "gpu_run_measured.json")
ROOT = os.path.dirname(os.path.dirname(RESULTS))
CALIBRATION = os.path.join(ROOT, "seqjax", "accelerators", "calibration.json")


def row_config(name: str) -> tuple[Config, int]:
    """The config and vocabulary of the row `name`."""
    from seqjax import config as config_lib
    from seqjax.config import Config

    row = parse(name)
    return config_lib.override(Config(), row.overrides()), row.vocab


def read(path: str, empty: dict) -> dict:
    """The JSON object in `path`, or `empty` where there is no such file."""
    if not os.path.isfile(path):
        return empty
    with open(path) as f:
        found: dict = json.load(f)
    return found


def predict(target_name: str, rows: list[Row]) -> None:
    """Each row's compile report for the target; rows that differ only in the GPU flags share one."""
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    use_target_compiler()
    import jax

    from seqjax.accelerators.report import compile_report

    found = read(PREDICTED, {})
    made: dict[tuple[str, ...], dict] = {}
    for row in rows:
        key = tuple(row.overrides())
        if key not in made:
            cfg, vocab = row_config(row.name)
            print("compiling", row.name, "for", target_name, flush=True)
            made[key] = {
                "target": target_name,
                "jax": jax.__version__,
                **compile_report(cfg, parse_target(target_name), vocab),
            }
        found[row.name] = made[key]
    with open(PREDICTED, "w") as f:
        json.dump(found, f, indent=1, default=str)
    print("wrote", PREDICTED)


def probe() -> dict[str, Any]:
    """The machine and its bf16 matmul rate (8192³ of ones, median of 10)."""
    import jax

    from seqjax.training.core.mfu import matmul_tflops

    return {"machine": machine(), "bf16_matmul_tflops": matmul_tflops(8192, 10, jax.numpy.bfloat16)}


def measure(rows: list[Row], budget: float) -> None:
    """Measures `rows` within `budget` seconds: the machine first, then each row, every record
    written to MEASURED as it comes."""
    deadline = time.monotonic() + budget
    print(f"{len(rows)} rows, about {planned_seconds(rows):.0f} s of the {budget:.0f} s budget", flush=True)
    results = read(MEASURED, {"runs": {}, "rows": {}})
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")
    run = f"{commit()} {started}"
    results["runs"][run] = {"commit": commit(), "started": started, **child("probe", timeout=4 * PROBE_SECONDS)}
    print("probe", json.dumps(results["runs"][run])[:400], flush=True)
    write(MEASURED, results)
    run_rows(rows, MEASURED, run, deadline)
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
    """Every measured row joins calibration.json's steps (replacing an earlier record of the same
    row and target), with the kernels of its program: the device's, or, for a row measured
    without them, compiled here by the code at `code` (default: the commit its run measured)."""
    import jax

    from seqjax.accelerators import kernels

    with open(MEASURED) as f:
        measured = json.load(f)
    with open(CALIBRATION) as f:
        data = json.load(f)
    recorded = {(step["row"], step["target"]): step for step in data["steps"]}
    for row, m in measured["rows"].items():
        if "step_seconds" not in m:
            continue
        if "kernels" in m:
            found, program = m["kernels"], f"compiled on the device (JAX {m['jax']})"
        else:
            revision = code or measured["runs"][m["run"]]["commit"]
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
    """The repository's commit: the code a measurement ran ("unknown" in a copy without git)."""
    try:
        found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    except OSError:
        return "unknown"
    return found.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("predict", "measure", "calibrate", "render", "row", "probe", "plan"))
    parser.add_argument("row", nargs="?", help="with `row`: a row's name (benchmarks/gpu_rows.py)")
    parser.add_argument("--rows", help="comma-separated row names (default: the plan; predict: the first rows too)")
    parser.add_argument("--budget", type=float, default=BUDGET_SECONDS, help="with `measure`: seconds in all")
    parser.add_argument("--target", default="h200:1")
    parser.add_argument("--cache", default="/tmp/seqjax_gpu_run_hlo", help="with `calibrate`: where HLO texts are kept")
    parser.add_argument(
        "--code", help="with `calibrate`: the commit to compile measured rows at (default: the measured)"
    )
    args = parser.parse_args()
    rows = names(args.rows) if args.rows else plan()
    if args.action == "predict":
        predict(args.target, names(args.rows) if args.rows else [*FIRST, *plan()])
    elif args.action == "measure":
        measure(rows, args.budget)
    elif args.action == "calibrate":
        calibrate(args.target, args.cache, args.code)
    elif args.action == "render":
        from gpu_render import render

        render(PREDICTED, MEASURED)
    elif args.action == "plan":
        for row in rows:
            print(f"{row.name:40} {row.estimate_seconds():5.0f} s")
        print(f"{'in all, with the probe':40} {planned_seconds(rows):5.0f} s of {args.budget:.0f}")
    elif args.action == "probe":
        print(json.dumps(probe()))
    else:
        print(json.dumps(measure_row(parse(args.row))))


if __name__ == "__main__":
    main()
