"""The per-kernel step-time model: each kernel's time from the calibrated figures, the step their
sum, its error on every GPU step measured, and no estimate where no step of the chip's family
was measured."""

import dataclasses

import pytest

from seqjax.accelerators import estimate
from seqjax.accelerators.kernels import Kernel, from_summary
from seqjax.accelerators.report import estimate_line
from seqjax.accelerators.targets import CHIPS, parse_target

H200 = CHIPS["h200"]
SMS, CLOCK = 132, 1.98e9  # gpus/h200.txtpb


def test_hopper_chips_share_the_rates_measured_on_an_h200_as_fractions_of_its_peak():
    data = estimate.calibration_data()["families"]["Hopper"]
    for kind in ("h100", "h200"):
        cal = estimate.calibration(kind)
        assert cal is not None and cal.matmul_efficiency["bf16"] == data["matmul_tflops"]["bf16"] / 989.0
    assert estimate.calibration("a100") is None and estimate.calibration("v5p") is None


@pytest.mark.parametrize(
    "kernel, work",
    [
        (Kernel("matmul", 1e12, "bf16", 10**6), lambda cal: 1e12 / (989e12 * cal.matmul_efficiency["bf16"])),
        (Kernel("matmul", 1e12, "f32", 10**6), lambda cal: 1e12 / (989e12 * cal.matmul_efficiency["f32"])),
        (Kernel("memory", 0.0, "", 10**9, (10**6, 0, 0)), lambda cal: 1e9 / (4.8e12 * cal.bandwidth_fraction)),
        (Kernel("memory", 0.0, "", 10**3, (0, 0, 16 * 10**9)), lambda cal: 1e9 / (SMS * CLOCK)),
    ],
    ids=["bf16 matmul", "f32 matmul", "memory-bound", "special-function-bound"],
)
def test_a_kernel_takes_the_longest_of_its_matrix_elementwise_and_memory_time_plus_a_launch(kernel, work):
    cal = estimate.calibration("h200")
    seconds = estimate.kernel_seconds(kernel, H200, "h200", cal)
    assert seconds == {"work": pytest.approx(work(cal)), "launch": cal.launch_seconds}


def test_a_round_trip_to_the_host_takes_the_calibrated_time_and_launches_nothing():
    cal = estimate.calibration("h200")
    assert 0 < cal.round_trip_seconds < 1e-4
    seconds = estimate.kernel_seconds(Kernel("round_trip", 0.0, "", 0), H200, "h200", cal)
    assert seconds == {"work": cal.round_trip_seconds, "launch": 0.0}


def test_a_conditional_costs_its_costliest_branch_not_all_of_them():
    cheap, dear = Kernel("memory", 0.0, "", 10**6, branch="c/0"), Kernel("memory", 0.0, "", 10**9, branch="c/1")
    outside = Kernel("memory", 0.0, "", 10**8)
    both = estimate.step_seconds([outside, cheap, dear], "h200")
    assert both == estimate.step_seconds([outside, dataclasses.replace(dear, branch="")], "h200")
    # a second conditional's branches count apart from the first's
    other = dataclasses.replace(cheap, branch="d/0")
    with_other = estimate.step_seconds([outside, cheap, dear, other], "h200")
    assert with_other["step"] == pytest.approx(both["step"] + estimate.step_seconds([cheap], "h200")["step"])


def test_a_step_is_its_kernels_times_their_launches_added_by_kind():
    cal = estimate.calibration("h200")
    found = [Kernel("memory", 0.0, "", 10**9, count=3), Kernel("collective", 0.0, "", 45 * 10**7, count=2)]
    seconds = estimate.step_seconds(found, "h200")
    memory = 3 * 1e9 / (4.8e12 * cal.bandwidth_fraction)
    assert seconds["memory_seconds"] == pytest.approx(memory)
    assert seconds["collective_seconds"] == pytest.approx(2 * 45e7 / H200.link_bandwidth)
    assert seconds["launch_seconds"] == pytest.approx(3 * cal.launch_seconds + 2 * cal.collective_launch_seconds)
    assert seconds["step"] == pytest.approx(sum(v for k, v in seconds.items() if k != "step"))


def test_the_estimate_is_within_25_percent_of_every_gpu_step_measured():
    errors = {e["row"]: e["error"] for e in estimate.measured_errors("h200")}
    assert len(errors) >= 4  # gpu_run's 125M and 1B rows, each kernel
    assert all(abs(error) <= 0.25 for error in errors.values()), errors


def test_each_measured_step_is_recomputed_from_its_stored_kernels():
    step = estimate.calibration_data()["steps"][0]
    (recomputed,) = [e for e in estimate.measured_errors("h200") if e["row"] == step["row"]]
    seconds = estimate.step_seconds(from_summary(step["kernels"]), step["target"].split(":")[0])
    assert recomputed["predicted_seconds"] == seconds["step"]
    assert recomputed["error"] == pytest.approx(seconds["step"] / step["step_seconds"] - 1)


def test_an_uncalibrated_chip_gets_no_estimate_but_the_roofline_labelled_as_a_bound():
    bound = {"compute_seconds": 0.010, "memory_seconds": 0.002, "collective_seconds": 0.001, "step": 0.011}
    for name in ("a100:8", "v5p:2x2x2"):
        target = parse_target(name)
        keys = estimate.for_target(target, "", 1e15, bound)
        assert keys["predicted_step_seconds"] is None and keys["predicted_mfu"] is None
        line = estimate_line({**keys, "roofline": bound})
        assert line.startswith(f"no step-time estimate: no GPU step measured on a {target.chip.name}")
        assert "roofline bound: at least 11.00 ms per step" in line


def test_a_calibrated_chip_states_the_estimates_error_on_the_measured_steps():
    keys = estimate.for_target(parse_target("h100:1"), GEMM_STEP, 2 * 4096**3, None)
    errors = [abs(e["error"]) for e in keys["estimate"]["measured"]]
    line = estimate_line({**keys, "roofline": None})
    assert line.startswith(f"estimate (per-kernel model, Hopper calibration; within {max(errors):.0%} of the ")
    assert f" of the {len(errors)} GPU steps measured (" in line
    cal = estimate.calibration("h100")
    gemm = 2 * 4096**3 / (989e12 * cal.matmul_efficiency["bf16"])
    assert keys["predicted_step_seconds"] == pytest.approx(gemm + cal.launch_seconds)


def test_a_program_with_a_data_dependent_loop_says_it_counts_one_trip_per_entry():
    walk = GEMM_STEP.replace("ENTRY", WALK_BODY + "ENTRY").replace(
        "  ROOT %c", "  %w = (s32[], bf16[4096,4096]) while(%t), condition=%cond.1, body=%walk\n  ROOT %c"
    )
    keys = estimate.for_target(parse_target("h100:1"), walk, 2 * 4096**3, None)
    assert keys["estimate"]["data_dependent_loops"] == 1
    assert "; 1 loop whose trip count depends on the data counted at one trip per entry" in estimate_line(
        {**keys, "roofline": None}
    )
    plain = estimate.for_target(parse_target("h100:1"), GEMM_STEP, 2 * 4096**3, None)
    assert plain["estimate"]["data_dependent_loops"] == 0
    assert "trip" not in estimate_line({**plain, "roofline": None})
    cal = estimate.calibration("h100")
    copy = 2 * 4096**2 * 2 / (3.35e12 * cal.bandwidth_fraction)  # the body's copy, once
    # and the host reads the condition twice: before the trip and to stop
    assert keys["predicted_step_seconds"] - plain["predicted_step_seconds"] == pytest.approx(
        copy + cal.launch_seconds + 2 * cal.round_trip_seconds
    )
    assert keys["estimate"]["seconds"]["round_trip_seconds"] == pytest.approx(2 * cal.round_trip_seconds)
    assert f"host round trips {2 * cal.round_trip_seconds * 1e3:.2f}, launches" in estimate_line(
        {**keys, "roofline": None}
    )


WALK_BODY = """%walk (p: (s32[], bf16[4096,4096])) -> (s32[], bf16[4096,4096]) {
  %p = (s32[], bf16[4096,4096]{1,0}) parameter(0)
  %v = bf16[4096,4096]{1,0} get-tuple-element(%p), index=1
  %copy.1 = bf16[4096,4096]{1,0} copy(%v)
  ROOT %t = (s32[], bf16[4096,4096]{1,0}) tuple(%i, %copy.1)
}
"""

GEMM_STEP = """
%gemm_fusion_dot (parameter_0: bf16[4096,4096], parameter_1: bf16[4096,4096]) -> bf16[4096,4096] {
  %parameter_0 = bf16[4096,4096]{1,0} parameter(0)
  %parameter_1 = bf16[4096,4096]{1,0} parameter(1)
  ROOT %dot.1 = bf16[4096,4096]{1,0} dot(%parameter_0, %parameter_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY %main (a: bf16[4096,4096], b: bf16[4096,4096]) -> bf16[4096,4096] {
  %a = bf16[4096,4096]{1,0} parameter(0)
  %b = bf16[4096,4096]{1,0} parameter(1)
  ROOT %c = bf16[4096,4096]{1,0} fusion(%a, %b), kind=kCustom, calls=%gemm_fusion_dot
}
"""
