"""`seqjax compile`'s answer: does the run fit on the target, which remat policy and attention
kernel did it get, what does a step communicate, and how fast should it be.

Memory per device is the compiled train step's (arguments + outputs not aliased to donated
arguments + temporaries) against the device's memory; on a GPU against the share JAX's
allocator takes by default (`XLA_PYTHON_CLIENT_MEM_FRACTION`, 0.75), on a TPU the whole HBM.
`model.remat=auto` takes the lightest policy whose train step fits that memory.

The compiler's FLOPs (a TPU's; the GPU compiler counts none) are one device's program, in which
XLA counts a loop's body once: times the devices and the microbatches of gradient accumulation
(optim.accum_steps, the train step's outer loop), they are the whole step's; loops inside a
microbatch (scanned layers, recurrences, vocabulary blocks) stay counted once, so there they
are a lower bound. The estimate below takes the model's count (`seqjax.training.core.mfu`)
where the model has one. The compiler's bytes accessed are left as counted (the update after
the loop reads each parameter and moment once, not once per microbatch): a lower bound too.

The step time is estimated on a GPU whose family has measured steps to be held against
(`estimate`: the program's kernels one by one at the measured matmul rates, the sustained
memory bandwidth and a launch cost each; the text states its error on those steps). Any other
target gets no estimate but the roofline bound, labelled as one: the longer of the model's
FLOPs at the target's dense bf16 peak and the bytes the step moves at the memory bandwidth (the
compiler's count on a TPU; on a GPU, whose compiler gives none, each argument, output and
temporary read or written once), plus the collectives' bytes over the links (NVLink, ICI; the
data-center network for a collective that crosses slices) with no overlap. MFU is the model's
FLOPs over the step time at the dense bf16 peak (for the bound, the most a run could reach).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from seqjax.accelerators import estimate as estimate_lib
from seqjax.accelerators import program
from seqjax.accelerators.abstract_run import OutOfMemory, abstract_run, compile_run
from seqjax.accelerators.state_fit import state_fit_report
from seqjax.accelerators.targets import Target, target_devices, uncached_compiles
from seqjax.config import Config
from seqjax.models import describe_kernel, kernel_choice
from seqjax.training.core.memory import format_bytes, per_device_bytes
from seqjax.training.core.mfu import train_flops_per_token
from seqjax.training.core.remat import RematChoice

GPU_MEMORY_FRACTION = 0.75  # JAX's default share of a GPU's memory


def usable_memory(target: Target) -> int:
    """Bytes a run may use per device of `target`."""
    if target.chip.platform != "gpu":
        return target.chip.memory_bytes
    fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", GPU_MEMORY_FRACTION))
    return int(target.chip.memory_bytes * fraction)


def roofline(
    target: Target, flops: float, bytes_moved: float, link_bytes: float, dcn_bytes: float = 0.0
) -> dict[str, float]:
    """Estimated seconds per step on `target` (see the module docstring): `flops` of the whole
    step, and per device the bytes it moves, sends within its slice and sends across slices."""
    chip = target.chip
    compute = flops / (target.count * chip.peak_tflops * 1e12)
    memory = bytes_moved / chip.memory_bandwidth
    communication = link_bytes / chip.link_bandwidth + (dcn_bytes / chip.dcn_bandwidth if dcn_bytes else 0.0)
    step = max(compute, memory) + communication
    return {"compute_seconds": compute, "memory_seconds": memory, "collective_seconds": communication, "step": step}


def attention_report(model: Any, calls: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The kernel asked for, the one the built `model` runs (`kernel_choice`), its calls per
    program (`calls`: `program.fused_attention_calls` of each), and any fallback."""
    choice = kernel_choice(model)
    if choice is None:
        return {"requested": None, "resolved": None, "padded_heads": None, "fused_calls": 0, "fallback": None}
    return {
        "requested": choice.requested,
        "resolved": choice.kernel,
        "padded_heads": None if choice.padded_heads is None else list(choice.padded_heads),
        "fused_calls": calls["train"].get(choice.kernel, 0),
        "fused_calls_by_step": {name: counts.get(choice.kernel, 0) for name, counts in calls.items()},
        "fallback": choice.fallback,
    }


def remat_report(choice: RematChoice | None) -> dict[str, Any] | None:
    """The policy asked for (`model.remat`), the one compiled and, for auto, the train step's
    peak bytes per device under each policy tried (None: refused by the compiler); None for a
    model without Transformer blocks."""
    if choice is None:
        return None
    return {"requested": choice.requested, "policy": choice.policy, "peaks": dict(choice.peaks)}


def compile_report(
    cfg: Config, target: Target, vocab_size: int | None = None, *, echo: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Compiles the run's train, eval and decode steps for `target` and reports on them (the
    JSON of `seqjax compile --json`). A run whose parameters, optimizer state and gradients
    alone exceed a device's usable memory is reported from their shapes, not compiled
    (`state_fit`: "compiled": false, with the remedies)."""
    run = abstract_run(cfg, target_devices(target), vocab_size)
    usable = usable_memory(target)
    early = state_fit_report(run["state"], run["placer"], run["mesh"], run["parts"].cfg.train.sharding, usable)
    if early is not None:
        return {**_placement(target, run, early["per_device_bytes"]["peak"]), **early}
    with uncached_compiles():
        built = compile_run(run, memory_limit=usable, echo=echo)
    parts, state, batch = built["parts"], built["state"], built["batch"]
    if isinstance(built["train"], OutOfMemory):
        return out_of_memory_report(target, built, built["train"])
    programs = {name: built[name] for name in ("train", "eval", "decode") if built[name] is not None}
    texts = {name: compiled.as_text() for name, compiled in programs.items()}
    memory = {name: program.memory(compiled) for name, compiled in programs.items()}
    train_memory = memory["train"]
    peak = max(m["peak"] for m in memory.values())
    collectives = program.collectives(texts["train"])
    dcn = program.dcn_collectives(texts["train"])
    collective_bytes = sum(entry["bytes"] for entry in collectives.values())
    dcn_bytes = sum(entry["bytes"] for entry in dcn.values())

    head_weights = parts.head.matmul_weights(cfg.model.d_model, parts.counts)
    per_token = train_flops_per_token(cfg, head_weights, batch["mask"].shape[1])
    rows, length = batch["mask"].shape
    tokens = rows * length
    model_flops = None if per_token is None else per_token * tokens
    cost = program.compiler_cost(programs["train"])
    compiler_flops = None if cost is None else cost["flops"] * target.count * cfg.optim.accum_steps
    if cost is None:  # the GPU compiler counts no bytes: each buffer read or written once at least
        moved = float(train_memory["arguments"] + train_memory["outputs"] + train_memory["temporaries"])
    else:
        moved = cost["bytes_accessed"]
    flops = model_flops if model_flops is not None else compiler_flops
    bound = None if flops is None else roofline(target, flops, moved, collective_bytes, dcn_bytes)
    calls = {name: program.fused_attention_calls(text) for name, text in texts.items()}
    return {
        **_placement(target, built, peak),
        "fits": peak <= usable,
        "per_device_bytes": {
            "parameters": per_device_bytes(state.params),
            "optimizer_state": per_device_bytes(state.opt_state),
            "temporaries": train_memory["temporaries"],
            "peak": peak,
        },
        "per_step_program_bytes": memory,
        "remat": remat_report(built["remat"]),
        "attention": attention_report(parts.model, calls),
        "collectives": collectives,
        "dcn_collectives": dcn,
        "collective_bytes_per_step": collective_bytes + dcn_bytes,
        "tokens_per_step": tokens,
        "flops_per_step": {"model": model_flops, "compiler": compiler_flops},
        "roofline": bound,
        **estimate_lib.for_target(target, texts["train"], model_flops, bound),
    }


def out_of_memory_report(target: Target, built: dict[str, Any], refusal: OutOfMemory) -> dict[str, Any]:
    """The report of a train step the compiler refused for the device's memory: the state's bytes
    per device, the temporaries the compiler asked for, and its message."""
    state = built["state"]
    parameters, optimizer = per_device_bytes(state.params), per_device_bytes(state.opt_state)
    temporaries = refusal.temporaries()
    peak = parameters + optimizer + (temporaries or 0)
    return {
        **_placement(target, built, peak),
        "fits": False,
        "compiler_message": refusal.message,
        "per_device_bytes": {
            "parameters": parameters,
            "optimizer_state": optimizer,
            "temporaries": temporaries,
            "peak": peak,
        },
    }


def _placement(target: Target, built: dict[str, Any], peak: int) -> dict[str, Any]:
    """The report's target, mesh and memory keys."""
    return {
        "target": target.name,
        "slices": target.slices,
        "devices": target.count,
        "device": target.chip.name,
        "mesh": {str(k): int(v) for k, v in built["mesh"].shape.items()},
        "sharding": built["parts"].cfg.train.sharding,
        "device_memory_bytes": target.chip.memory_bytes,
        "usable_memory_bytes": usable_memory(target),
        "margin_bytes": usable_memory(target) - peak,
    }


def problems(report: dict[str, Any]) -> list[str]:
    """What makes `seqjax compile` exit non-zero: a run that does not fit, a fused kernel asked
    for by name that the program does not contain."""
    found = []
    if not report["fits"]:
        found.append(
            f"does not fit: {format_bytes(report['per_device_bytes']['peak'])} per device against "
            f"{format_bytes(report['usable_memory_bytes'])} usable"
        )
    attention = report.get("attention")
    if attention and attention["requested"] in program.fused_attention_kernels() and attention["fused_calls"] == 0:
        why = attention["fallback"] or "the compiled program has no fused attention call"
        found.append(f"model.attention_kernel={attention['requested']} is not the kernel compiled: {why}")
    return found


def describe(report: dict[str, Any]) -> str:
    """The report as the lines `seqjax compile` prints."""
    b = report["per_device_bytes"]
    verdict = "fits" if report["fits"] else "DOES NOT FIT"
    where = (
        f"target {report['devices']} x {report['device']} ({report['target']}), mesh {report['mesh']}, "
        f"sharding {report['sharding']}"
    )
    if report.get("compiled") is False:
        return "\n".join(
            [
                where,
                f"memory per device, from the shapes: parameters {format_bytes(b['parameters'])}, optimizer state "
                f"{format_bytes(b['optimizer_state'])}, gradients {format_bytes(b['gradients'])}: "
                f"{format_bytes(b['peak'])} before any activation, of {format_bytes(report['usable_memory_bytes'])} "
                f"usable: {verdict} (not compiled)",
                *(f"  {remedy}" for remedy in report["remedies"]),
            ]
        )
    if "compiler_message" in report:
        temporaries = "?" if b["temporaries"] is None else format_bytes(b["temporaries"])
        return "\n".join(
            [
                f"target {report['devices']} x {report['device']} ({report['target']}), mesh {report['mesh']}, "
                f"sharding {report['sharding']}",
                f"memory per device: parameters {format_bytes(b['parameters'])}, optimizer state "
                f"{format_bytes(b['optimizer_state'])}, step temporaries {temporaries}: {verdict} "
                f"(the compiler: {report['compiler_message']})",
            ]
        )
    lines = [
        f"target {report['devices']} x {report['device']} ({report['target']}"
        + (f", {report['slices']} slices" if report["slices"] > 1 else "")
        + f"), mesh {report['mesh']}, sharding {report['sharding']}",
        f"memory per device: parameters {format_bytes(b['parameters'])}, optimizer state "
        f"{format_bytes(b['optimizer_state'])}, step temporaries {format_bytes(b['temporaries'])}, peak "
        f"{format_bytes(b['peak'])} of {format_bytes(report['usable_memory_bytes'])} usable: {verdict} "
        f"(margin {format_bytes(abs(report['margin_bytes']))}{'' if report['fits'] else ' short'})",
    ]
    remat = report["remat"]
    if remat is not None and remat["requested"] == "auto":
        choice = RematChoice("auto", remat["policy"], remat["peaks"], report["usable_memory_bytes"])
        lines.append(choice.describe())
    attention = report["attention"]
    if attention["requested"] is not None:
        steps = ", ".join(f"{k} {v}" for k, v in attention["fused_calls_by_step"].items())
        resolved = describe_kernel(attention["resolved"], attention["padded_heads"])
        lines.append(f"attention: requested {attention['requested']}, resolved {resolved}; fused calls: {steps}")
        if attention["fallback"]:
            lines.append(f"notice: {attention['fallback']}")
    kinds = ", ".join(f"{k} x{v['count']} {format_bytes(v['bytes'])}" for k, v in report["collectives"].items())
    lines.append(f"collectives per train step: {kinds or 'none'}")
    if report["dcn_collectives"]:
        across = ", ".join(
            f"{k} x{v['count']} {format_bytes(v['bytes'])}" for k, v in report["dcn_collectives"].items()
        )
        lines.append(f"across slices (DCN): {across}")
    flops = report["flops_per_step"]
    if flops["model"] is not None:
        compiler = "" if flops["compiler"] is None else f", the compiler's {flops['compiler']:.3g}"
        lines.append(f"FLOPs per step: model {flops['model']:.3g}{compiler} ({report['tokens_per_step']:,} tokens)")
    lines.append(estimate_line(report))
    return "\n".join(lines)


def estimate_line(report: dict[str, Any]) -> str:
    """The step time line: the per-kernel estimate with its error on the measured GPU steps, or
    why there is none and the roofline bound."""
    estimate, mfu = report["estimate"], report["predicted_mfu"]
    if estimate["model"] is None:
        bound, most = estimate["step_seconds_at_least"], estimate["mfu_at_most"]
        if bound is None:
            return f"no step-time estimate: {estimate['why']}"
        r = report["roofline"]
        return (
            f"no step-time estimate: {estimate['why']}; roofline bound: at least {bound * 1e3:.2f} ms per step "
            f"(compute {r['compute_seconds'] * 1e3:.2f}, memory {r['memory_seconds'] * 1e3:.2f}, collectives "
            f"{r['collective_seconds'] * 1e3:.2f} ms)" + ("" if most is None else f", MFU at most {most:.1%}")
        )
    seconds, errors = estimate["seconds"], [e["error"] for e in estimate["measured"]]
    held = (
        f"within {max(abs(e) for e in errors):.0%} of the {len(errors)} GPU steps measured "
        f"({min(errors):+.0%} to {max(errors):+.0%})"
        if errors
        else "no GPU step measured to hold it against"
    )
    parts = ", ".join(
        f"{name} {seconds[f'{name}_seconds'] * 1e3:.2f}" for name in ("matmul", "attention", "memory", "collective")
    )
    loops = estimate["data_dependent_loops"]
    counted = (
        f"; {loops} loop{'s' if loops > 1 else ''} whose trip count depends on the data counted at one trip "
        "per entry: longer where an entry takes more"
        if loops
        else ""
    )
    if seconds["round_trip_seconds"]:
        parts += f", host round trips {seconds['round_trip_seconds'] * 1e3:.2f}"
    return (
        f"estimate (per-kernel model, {estimate['family']} calibration; {held}): "
        f"{report['predicted_step_seconds'] * 1e3:.2f} ms per step ({parts}, launches "
        f"{seconds['launch_seconds'] * 1e3:.2f} ms)" + ("" if mfu is None else f", MFU {mfu:.1%}") + counted
    )


def write_json(path: str, report: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
