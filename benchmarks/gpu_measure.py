"""`gpu_run.py measure`: each row trained for a few steps in a process of its own on the first
device, its step timed, its memory read and its kernels traced, each row written to the results
as it finishes.

A row's process (`measure_row`) compiles the train step as `seqjax train` does (`model.remat`
resolved for the device's memory), makes the state, runs WARM_STEPS then TIMED_STEPS steps, each
timed alone (the loss read back), and then TRACED_STEPS more under `jax.profiler.trace`. Its own
process, because XLA reads its flags when the backend starts and because the allocator's peak
is then the row's own. The parent (`run_rows`) never starts a backend: a process holding the
GPU's memory would shrink what the rows' `remat=auto` sees.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
from gpu_rows import TIMED_STEPS, TRACED_STEPS, WARM_STEPS, Row, parse
from gpu_trace import record, top_kernels

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_run.py")
EXTRA = "GPU_RUN_SET"  # overrides added to every row's config: the tests' tiny shapes, never a real run's
# A packed row's lines: exponential lengths of mean MEAN_LINE tokens, clipped to [MIN_LINE, the row's
# length], so that no line is cut and a row of 2,048 tokens holds at most 32 of them.
MEAN_LINE, MIN_LINE = 256, 64


def unpacked_batches(vocab: int, rows: int, length: int, count: int) -> list[dict[str, np.ndarray]]:
    """`count` batches of `rows` random rows of `length` tokens past the specials, as the first
    measurement drew them (the same batches for every row of a model)."""
    rng = np.random.default_rng(0)
    found = []
    for _ in range(count):
        ids = rng.integers(4, vocab, size=(rows, length + 1), dtype=np.int32)
        found.append({"inputs": ids[:, :-1], "targets": ids[:, 1:], "mask": np.ones((rows, length), np.float32)})
    return found


def packed_batches(vocab: int, rows: int, length: int, count: int) -> list[dict[str, np.ndarray]]:
    """`count` batches of `rows` packed rows of `length` tokens (`PackedLMBatches`, as
    `data.packing` makes them) from random lines of MIN_LINE to `length` tokens."""
    from seqjax.data.batching.packing import PackedLMBatches
    from seqjax.data.tokenizers.vocab import EOS_ID

    rng = np.random.default_rng(0)
    lengths = rng.exponential(MEAN_LINE, size=2 * rows * count * length // MEAN_LINE)
    lengths = np.clip(lengths, MIN_LINE, length).astype(int)
    stream = rng.integers(4, vocab, size=int(lengths.sum()), dtype=np.int32)
    stream[np.cumsum(lengths) - 1] = EOS_ID
    batches = PackedLMBatches(stream, rows, length, seed=0)
    return [batches.batch(i) for i in range(count)]


def measure_row(row: Row) -> dict[str, Any]:
    """Compiles `row`'s train step on the first device, runs and times it, traces it; its record."""
    from seqjax.gpu_flags import use_gpu_flags
    from seqjax.platforms import use_machine_platforms

    use_machine_platforms()  # before JAX starts its backend, as the command line does
    use_gpu_flags()
    import jax

    from seqjax import config as config_lib
    from seqjax import optimizers as optim
    from seqjax.accelerators import kernels, program
    from seqjax.accelerators.abstract_run import OutOfMemory, abstract_batch, build, compile_train_under_remat
    from seqjax.accelerators.report import attention_report, remat_report
    from seqjax.config import Config
    from seqjax.training.core.layout import batch_sharding, make_mesh
    from seqjax.training.core.mfu import peak_tflops, train_flops_per_token
    from seqjax.training.core.remat import device_memory_limit
    from seqjax.training.core.state import init_state

    cfg = config_lib.override(Config(), [*row.overrides(), *os.environ.get(EXTRA, "").split()])
    device = jax.devices()[0]
    mesh = make_mesh(cfg.train.mesh, [device])
    start = time.perf_counter()
    parts, shapes = build(cfg, mesh, row.vocab), abstract_batch(cfg, mesh)
    limit = device_memory_limit(device)
    parts, train, _, remat = compile_train_under_remat(
        parts, mesh, shapes, limit, lambda line: print(line, file=sys.stderr)
    )
    if isinstance(train, OutOfMemory):
        raise RuntimeError(train.message)
    compile_seconds = time.perf_counter() - start
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    state = init_state(parts.model, parts.head, optimizer, cfg.train.seed, shapes, mesh, cfg.train.sharding)
    rows, length = shapes["mask"].shape
    make = packed_batches if row.packed else unpacked_batches
    batches = make(row.vocab, rows, length, WARM_STEPS + TIMED_STEPS + TRACED_STEPS)
    losses, seconds = [], []
    for batch in batches[: WARM_STEPS + TIMED_STEPS]:
        placed = jax.block_until_ready(jax.device_put(batch, batch_sharding(mesh)))
        begin = time.perf_counter()
        state, metrics = train(state, placed)
        losses.append(float(metrics["loss"]))  # waits for the step
        seconds.append(time.perf_counter() - begin)
    step = statistics.median(seconds[WARM_STEPS:])
    traced = jax.block_until_ready(jax.device_put(batches[WARM_STEPS + TIMED_STEPS :], batch_sharding(mesh)))

    def run_traced() -> None:
        nonlocal state
        for batch in traced:
            state, metrics = train(state, batch)
            float(metrics["loss"])

    try:
        with tempfile.TemporaryDirectory() as directory:
            trace = top_kernels(record(run_traced, directory), len(traced), step)
    except Exception as err:  # a profiler the machine refuses (CUPTI) costs the row its kernels, not its step
        trace = {"error": f"{type(err).__name__}: {err}"}
    tokens = statistics.mean(float(batch["mask"].sum()) for batch in batches[WARM_STEPS : WARM_STEPS + TIMED_STEPS])
    flops = train_flops_per_token(cfg, parts.head.matmul_weights(cfg.model.d_model, parts.counts), length)
    peak = peak_tflops(cfg.train.peak_tflops, device.device_kind)
    text = train.as_text()
    fused = program.fused_attention_calls(text)
    found: dict[str, Any] = {
        "device": device.device_kind,
        "jax": jax.__version__,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "settings": [*row.overrides(), *os.environ.get(EXTRA, "").split()],
        "remat": {**(remat_report(remat) or {}), "limit": limit},
        "attention": attention_report(parts.model, {"train": fused}),
        "compile_seconds": compile_seconds,
        "step_seconds": step,
        "step_seconds_all": seconds,
        "warm_steps": WARM_STEPS,
        "losses": losses,
        "tokens_per_step": tokens,  # targets: a packed row's padding is not counted
        "tokens_per_second": tokens / step,
        "model_flops_per_step": None if flops is None else flops * tokens,
        "peak_tflops": peak,
        "mfu": None if flops is None else flops * tokens / step / (peak * 1e12),
        "fused_attention_calls": fused["cudnn"],
        "kernels": kernels.summary(kernels.kernels(text)),
        "compiled_memory": program.memory(train),
        "allocator_peak_bytes": (device.memory_stats() or {}).get("peak_bytes_in_use"),  # None on a CPU
        "trace": trace,
    }
    if row.packed:
        segments = np.stack([batch["segment_ids"].max(axis=1) for batch in batches])
        found["segments_per_row"] = {"mean": float(segments.mean()), "max": int(segments.max())}
    return found


def child(action: str, *arguments: str, env: dict[str, str] | None = None, timeout: float) -> dict[str, Any]:
    """The JSON record the last line of `gpu_run.py ACTION ARGUMENTS` prints, or {"error": why}."""
    try:
        done = subprocess.run(
            [sys.executable, SCRIPT, action, *arguments], capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired as err:  # its output comes as bytes, text=True or not
        print((err.stderr or b"")[-3000:].decode(errors="replace"), flush=True)
        return {"error": f"cut off after {timeout:.0f} s"}
    if done.returncode:
        print(done.stderr[-3000:], flush=True)
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    record: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return record


def write(path: str, results: dict[str, Any]) -> None:
    """Replaces `path` by `results` whole (a run cut off mid-write leaves the previous file)."""
    with open(path + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(path + ".tmp", path)


def run_rows(rows: list[Row], path: str, run: str, deadline: float) -> None:
    """Measures each of `rows` in its own process and writes its record into `path`'s rows
    (with `run`, its key in the file's runs) as soon as it finishes. A row whose estimate does
    not fit before `deadline` (a `time.monotonic()`) is not started; one that runs past twice
    its estimate, or past the deadline, is cut off and recorded as such."""
    from seqjax.gpu_flags import SWITCH

    for row in rows:
        left = deadline - time.monotonic()
        if row.estimate_seconds() > left:
            print(f"not measured: {row.name} (about {row.estimate_seconds():.0f} s, {left:.0f} s left)", flush=True)
            continue
        print(f"measuring {row.name} (about {row.estimate_seconds():.0f} s, {left:.0f} s left)", flush=True)
        begin = time.monotonic()
        env = {**os.environ, SWITCH: "on" if row.flags else "off"}
        found = child("row", row.name, env=env, timeout=min(2 * row.estimate_seconds() + 30, left))
        found.update(run=run, wall_seconds=time.monotonic() - begin)
        with open(path) as f:
            results = json.load(f)
        results["rows"][row.name] = found
        write(path, results)
        brief = {k: found.get(k) for k in ("error", "step_seconds", "mfu", "allocator_peak_bytes", "wall_seconds")}
        print(row.name, json.dumps({k: v for k, v in brief.items() if v is not None}), flush=True)


def names(text: str) -> list[Row]:
    """The rows of a comma-separated list of names (`parse` checks each)."""
    return [parse(name.strip()) for name in text.split(",") if name.strip()]
