"""How long a compiled step should take on a GPU: a per-kernel model, calibrated by measurement.

Each kernel of the program (`kernels.kernels`) takes the longest of its matrix FLOPs at the
matmul rate measured for its dtype on the chip's family, its elementwise instructions at the
rate of the units that run them, and its bytes at the sustained share of the memory bandwidth —
plus a fixed launch cost; a collective takes its bytes over the links plus a collective's launch
cost; each time the host reads a value of the device's to go on (a conditional, a trip of a loop
whose trip count depends on the data) costs a round trip. The step is their sum: kernels run one
after another on one stream, nothing overlaps.

The figures are in `calibration.json`, one place: per chip family the matmul rates measured on
one of its chips, the sustained bandwidth share, the elementwise units per multiprocessor and
clock, the launch costs, the round trip, and the GPU steps measured so far with the kernels of
their programs — what the model is held against (`measured_errors`). A chip of no calibrated family gets no
estimate, only the roofline bound (`report.roofline`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import re
from typing import Any

from seqjax.accelerators import kernels as kernels_lib
from seqjax.accelerators import program
from seqjax.accelerators.kernels import Kernel
from seqjax.accelerators.targets import CHIPS, Chip, Target, gpu_description


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A chip family's measured and published figures (see calibration.json's `notes`)."""

    family: str
    chips: tuple[str, ...]  # the kinds it covers (`targets.CHIPS` keys)
    matmul_efficiency: dict[str, float]  # operand dtype: measured matmul rate / the dense bf16 peak
    bandwidth_fraction: float  # sustained share of the memory bandwidth
    vector_per_clock: tuple[int, int, int]  # (float, integer, special) instructions per SM per clock
    launch_seconds: float
    collective_launch_seconds: float
    round_trip_seconds: float  # the host reading a value of the device's: copy, drain, relaunch


@functools.cache
def calibration_data() -> dict[str, Any]:
    """calibration.json: {"families": {...}, "steps": [measured steps with their kernels]}."""
    result: dict[str, Any] = json.loads(
        importlib.resources.files("seqjax.accelerators").joinpath("calibration.json").read_text()
    )
    return result


def calibration(kind: str) -> Calibration | None:
    """The calibration of chip `kind` ("h100"), or None where none of its family was measured."""
    for family, entry in calibration_data()["families"].items():
        if kind in entry["chips"]:
            measured_on = CHIPS[entry["measured_on"]]
            return Calibration(
                family,
                tuple(entry["chips"]),
                {dtype: rate / measured_on.peak_tflops for dtype, rate in entry["matmul_tflops"].items()},
                entry["memory_bandwidth_fraction"],
                tuple(entry["vector_per_sm_clock"]),
                entry["launch_seconds"],
                entry["collective_launch_seconds"],
                entry["round_trip_seconds"],
            )
    return None


@functools.cache
def _multiprocessors(kind: str) -> tuple[int, float]:
    """(multiprocessors, clock Hz) of GPU `kind`, from the description XLA compiles for."""
    text = gpu_description(kind)
    cores = re.search(r"core_count:\s*(\d+)", text)
    clock = re.search(r"clock_rate_ghz:\s*([0-9.]+)", text)
    if cores is None or clock is None:
        raise ValueError(f"the {kind} description names no core_count or clock_rate_ghz")
    return int(cores.group(1)), float(clock.group(1)) * 1e9


def kernel_seconds(kernel: Kernel, chip: Chip, kind: str, cal: Calibration) -> dict[str, float]:
    """One launch of `kernel` on `chip` ({"work", "launch"} seconds)."""
    if kernel.kind == "collective":
        return {"work": kernel.bytes / chip.link_bandwidth, "launch": cal.collective_launch_seconds}
    if kernel.kind == "round_trip":
        return {"work": cal.round_trip_seconds, "launch": 0.0}
    efficiency = cal.matmul_efficiency.get(kernel.dtype, cal.matmul_efficiency["bf16"])
    matrix = kernel.flops / (chip.peak_tflops * 1e12 * efficiency)
    sms, clock = _multiprocessors(kind)
    cycles = sum(ops / per_clock for ops, per_clock in zip(kernel.vector, cal.vector_per_clock))
    memory = kernel.bytes / (chip.memory_bandwidth * cal.bandwidth_fraction)
    return {"work": max(matrix, cycles / (sms * clock), memory), "launch": cal.launch_seconds}


def step_seconds(found: list[Kernel], kind: str) -> dict[str, float] | None:
    """Seconds per step of the program of kernels `found` on GPU `kind`: the total ("step") and
    its parts (time in matmul, attention, memory and collective kernels, in the host's round trips
    and in launches); None for a chip no calibration covers."""
    cal = calibration(kind)
    if cal is None:
        return None
    chip = CHIPS[kind]
    names = ("matmul", "attention", "memory", "collective", "round_trip", "launch")
    parts = dict.fromkeys(names, 0.0)
    # a conditional runs one of its branches: the costliest of them counts
    branches: dict[str, dict[str, dict[str, float]]] = {}
    for kernel in found:
        conditional, _, branch = kernel.branch.partition("/")
        into = branches.setdefault(conditional, {}).setdefault(branch, dict.fromkeys(names, 0.0)) if branch else parts
        seconds = kernel_seconds(kernel, chip, kind, cal)
        into[kernel.kind] += kernel.count * seconds["work"]
        into["launch"] += kernel.count * seconds["launch"]
    for taken in branches.values():
        costliest = max(taken.values(), key=lambda branch_parts: sum(branch_parts.values()))
        for name in names:
            parts[name] += costliest[name]
    return {**{f"{name}_seconds": value for name, value in parts.items()}, "step": sum(parts.values())}


def measured_errors(kind: str) -> list[dict[str, Any]]:
    """The model against every measured step of `kind`'s family: per step its row, target,
    measured and predicted seconds and the relative error (predicted / measured - 1)."""
    cal = calibration(kind)
    if cal is None:
        return []
    found = []
    for step in calibration_data()["steps"]:
        step_kind = step["target"].split(":")[0]
        if step_kind not in cal.chips:
            continue
        estimate = step_seconds(kernels_lib.from_summary(step["kernels"]), step_kind)
        assert estimate is not None  # the family covers it
        found.append(
            {
                "row": step["row"],
                "target": step["target"],
                "measured_seconds": step["step_seconds"],
                "predicted_seconds": estimate["step"],
                "error": estimate["step"] / step["step_seconds"] - 1,
            }
        )
    return found


def for_target(target: Target, train_hlo: str, model_flops: float | None, bound: dict[str, float] | None) -> dict:
    """The report's step-time keys for `target`'s train step `train_hlo`: "predicted_step_seconds"
    and "predicted_mfu" (None for a chip no calibration covers) and "estimate": the model used,
    its parts, its errors on the measured steps and the loops it counts at one trip per entry
    because their trip counts depend on the data — or, uncalibrated, why there is none and the
    roofline `bound` (report.roofline) in its place."""
    kind = target.name.split(":")[0].lower()
    cal = calibration(kind) if target.chip.platform == "gpu" else None
    peak = target.count * target.chip.peak_tflops * 1e12
    if cal is None:
        covered = ", ".join(CHIPS[k].name for entry in calibration_data()["families"].values() for k in entry["chips"])
        bound_mfu = None if bound is None or model_flops is None else model_flops / (bound["step"] * peak)
        return {
            "estimate": {
                "model": None,
                "why": f"no GPU step measured on a {target.chip.name} or its family (calibrated: {covered})",
                "step_seconds_at_least": None if bound is None else bound["step"],
                "mfu_at_most": bound_mfu,
            },
            "predicted_step_seconds": None,
            "predicted_mfu": None,
        }
    seconds = step_seconds(kernels_lib.kernels(train_hlo, target.count), kind)
    assert seconds is not None  # calibrated
    return {
        "estimate": {
            "model": "per-kernel",
            "family": cal.family,
            "seconds": seconds,
            "measured": measured_errors(kind),
            # each counted at one trip per entry: the step takes longer where an entry takes more
            "data_dependent_loops": program.data_dependent_loops(train_hlo),
        },
        "predicted_step_seconds": seconds["step"],
        # a program without kernels (a stand-in) takes no time: no MFU to state
        "predicted_mfu": None
        if model_flops is None or seconds["step"] <= 0
        else model_flops / (seconds["step"] * peak),
    }
