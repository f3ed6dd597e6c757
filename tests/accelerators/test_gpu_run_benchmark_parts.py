"""benchmarks/gpu_run.py without a GPU: the rows planned and what they cost, their names, the
trace reader on a GPU trace written by hand and on a CPU trace recorded here, and one row
measured end to end on the CPU at tiny shapes (GPU_RUN_SET), then rendered and calibrated."""

import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from project_scripts import load_script

gpu_run = load_script("benchmarks/gpu_run.py", "gpu_run")
load_script("benchmarks/gpu_render.py", "gpu_render")
# The modules gpu_run imported (benchmarks/ on the path): one copy of each.
rows, trace, measure, render = (sys.modules[f"gpu_{name}"] for name in ("rows", "trace", "measure", "render"))

TINY = (
    "model.d_model=32 model.layers=1 model.num_heads=2 model.kv_heads=1 model.d_ff=64 model.max_len=32 "
    "data.seq_len=32 train.batch_size=2 train.peak_tflops=1"
)
CPU_ROW = rows.Row("125M", "xla", remat="auto", flags=True)  # cuDNN's attention refuses a CPU


def test_the_plan_fits_the_budget_and_starts_with_the_baselines_seqjax_train_runs():
    plan = rows.plan()
    assert plan[:2] == [
        rows.Row(model, "cudnn", remat="auto", flags=True, scanned=False, dropout=False) for model in ("1B", "125M")
    ]
    assert len({row.name for row in plan}) == len(plan)
    assert rows.planned_seconds(plan) == rows.PROBE_SECONDS + sum(row.estimate_seconds() for row in plan)
    assert rows.planned_seconds(plan) <= rows.BUDGET_SECONDS


def test_each_planned_row_changes_one_setting_of_its_models_baseline():
    plan = rows.plan()
    fields = ("kernel", "remat", "packed", "flags", "scanned", "dropout")
    for row in plan[2:]:
        base = rows.BASELINE[row.model]
        assert sum(getattr(row, f) != getattr(base, f) for f in fields) == 1, row.name


def test_an_unrolled_row_without_dropout_sets_both_and_costs_the_unrolled_compile():
    row, first = rows.BASELINE["1B"], rows.Row("1B", "cudnn", remat="auto", flags=True)
    assert row.name == "1B/cudnn/remat=auto/unrolled/no-dropout/flags=on"
    assert [o for o in row.overrides() if o not in first.overrides()] == [
        "model.scan_layers=false",
        "model.dropout=0.0",
    ]
    cfg, _ = gpu_run.row_config(row.name)
    assert (cfg.model.scan_layers, cfg.model.dropout) == (False, 0.0)
    assert row.estimate_seconds() - first.estimate_seconds() == pytest.approx(14 * (rows.UNROLLED_COMPILE - 1))


def test_a_rows_estimate_is_start_compile_state_steps_and_trace():
    row = rows.Row("1B", "cudnn")
    steps = (rows.WARM_STEPS + rows.TIMED_STEPS + rows.TRACED_STEPS) * 0.357
    assert row.estimate_seconds() == pytest.approx(rows.START + 14 + rows.INIT["1B"] + steps + rows.TRACE)


def test_names_round_trip_and_the_first_measurements_names_keep_their_settings():
    for row in [*rows.FIRST, *rows.plan()]:
        assert rows.parse(row.name) == row
    assert rows.parse("1B/cudnn") == rows.Row("1B", "cudnn", remat="full", packed=False, flags=False)
    assert rows.parse("125M/xla/remat=dots/packed/flags=on") == rows.Row("125M", "xla", "dots", True, True)
    assert rows.parse("125M/cudnn/unrolled/no-dropout") == rows.Row("125M", "cudnn", scanned=False, dropout=False)


@pytest.mark.parametrize(
    "name", ["8B/cudnn", "1B/splash", "1B/cudnn/remat=some", "1B/cudnn/flags=on/packed", "1B/cudnn/no-dropout/unrolled"]
)
def test_a_name_that_is_no_row_is_refused(name):
    with pytest.raises(ValueError, match="row"):
        rows.parse(name)


def test_packed_ratios_divide_each_packed_step_by_its_unpacked_twins_and_name_its_stack():
    unrolled = rows.BASELINE["1B"].name
    packed = unrolled.replace("/flags=on", "/packed/flags=on")
    predicted = {
        unrolled: {"predicted_step_seconds": 0.200},
        packed: {"predicted_step_seconds": 0.210},
        "125M/cudnn/remat=auto/packed/flags=on": {"predicted_step_seconds": 0.043},  # no unpacked twin
        "1B/cudnn/remat=auto/packed/flags=on": {"predicted_step_seconds": 0.303},
        "1B/cudnn/remat=auto/flags=on": {"predicted_step_seconds": 0.290},
    }
    assert render.packed_ratios(predicted) == "1B unrolled 1.05x, 1B scanned with dropout 1.04x"


def test_a_packed_row_adds_the_packed_settings_and_nothing_else():
    packed, unpacked = rows.Row("1B", "cudnn", packed=True), rows.Row("1B", "cudnn")
    assert packed.overrides()[: len(unpacked.overrides())] == unpacked.overrides()
    assert packed.overrides()[len(unpacked.overrides()) :] == list(rows.PACKED)


def test_a_rows_config_is_the_llama_model_under_its_settings():
    cfg, vocab = gpu_run.row_config("125M/cudnn/remat=auto/packed")
    assert (cfg.model.d_model, cfg.model.layers, cfg.model.attention_kernel) == (768, 12, "cudnn")
    assert (cfg.model.remat, cfg.data.packing, cfg.train.batch_size, vocab) == ("auto", True, 8, 32000)


def test_packed_batches_hold_whole_lines_of_at_least_min_line_tokens_each_counted_from_its_start():
    batches = measure.packed_batches(vocab=100, rows=4, length=512, count=3)
    segments = np.stack([batch["segment_ids"] for batch in batches])
    assert segments.shape == (3, 4, 512)
    assert 1 < segments.max(axis=2).mean()
    for row in segments.reshape(-1, 512):
        assert (np.bincount(row)[1:] >= measure.MIN_LINE).all()  # each segment's tokens
    for batch in batches:
        assert (batch["mask"] == (batch["segment_ids"] > 0)).all()
        starts = np.flatnonzero(np.diff(batch["segment_ids"][0], prepend=0))  # the first row's segments begin
        assert (batch["positions"][0, starts] == 0).all()


def test_a_row_that_failed_keeps_its_line_in_the_table_with_its_error(tmp_path, monkeypatch):
    before = json.loads(open(gpu_run.MEASURED).read())
    failed = {"error": "RuntimeError: out of memory | 3 GiB", "run": "now"}
    path = tmp_path / "measured.json"
    path.write_text(json.dumps({**before, "rows": {**before["rows"], CPU_ROW.name: failed}}))
    written = {}
    monkeypatch.setattr(render, "write_result", lambda name, title, body, machine: written.update(body=body) or "")
    render.render(gpu_run.PREDICTED, str(path))
    lines = written["body"].splitlines()
    (header,) = [
        line for line in lines if line.startswith("| model | kernel | remat | stack | dropout | packed | flags | run |")
    ]
    (line,) = [line for line in lines if "out of memory" in line]
    assert line.count("|") == header.count("|") and "out of memory / 3 GiB" in line


# Two kernels on a GPU's stream, one launched twice, and CUPTI's overhead on a line of its own.
GPU_TRACE = """
planes {
  id: 1 name: "/device:GPU:0"
  lines {
    id: 7 name: "Stream #7(Kernel)"
    events { metadata_id: 1 offset_ps: 0 duration_ps: 3000000 stats { metadata_id: 1 str_value: "fusion.3" } }
    events { metadata_id: 2 offset_ps: 4000000 duration_ps: 1000000 stats { metadata_id: 1 str_value: "add.7" } }
    events { metadata_id: 1 offset_ps: 6000000 duration_ps: 5000000 stats { metadata_id: 1 str_value: "fusion.9" } }
  }
  lines { id: 9 name: "CUPTI overhead" events { metadata_id: 2 offset_ps: 0 duration_ps: 90000000 } }
  event_metadata { key: 1 value { id: 1 name: "sm90_gemm" } }
  event_metadata { key: 2 value { id: 2 name: "loop_add_fusion" } }
  stat_metadata { key: 1 value { id: 1 name: "hlo_op" } }
}
"""


def test_a_gpu_traces_kernels_are_summed_by_name_per_step_from_its_streams_alone():
    found = trace.top_kernels(jax.profiler.ProfileData.from_text_proto(GPU_TRACE), steps=2, step_seconds=0.005)
    assert found["kernel_ms_per_step"] == pytest.approx((3 + 1 + 5) / 1000 / 2)
    assert found["launches_per_step"] == 1.5
    gemm, add = found["top"]
    assert gemm == {
        "name": "sm90_gemm",
        "ms_per_step": pytest.approx(0.004),
        "share_of_step": pytest.approx(0.004 / 5),
        "launches_per_step": 1.0,
        "hlo_ops": ["fusion.3", "fusion.9"],
    }
    assert (add["name"], add["ms_per_step"], add["hlo_ops"]) == ("loop_add_fusion", pytest.approx(0.0005), ["add.7"])


def test_a_cpu_traces_thunks_are_ranked_by_their_time_in_the_trace(tmp_path):
    step = jax.jit(lambda a: jnp.tanh(a @ a) + jnp.sin(a).sum())
    a = jnp.ones((256, 256))
    step(a).block_until_ready()
    profile = trace.record(lambda: [step(a).block_until_ready() for _ in range(2)], str(tmp_path))
    totals: dict[str, float] = {}
    for name, _, seconds in trace.device_events(profile):
        totals[name] = totals.get(name, 0.0) + seconds
    found = trace.top_kernels(profile, steps=2, step_seconds=0.01, count=2)
    ranked = sorted(totals, key=lambda name: -totals[name])[:2]
    assert [k["name"] for k in found["top"]] == ranked
    assert found["top"][0]["ms_per_step"] == pytest.approx(1000 * totals[ranked[0]] / 2)
    assert found["kernel_ms_per_step"] == pytest.approx(1000 * sum(totals.values()) / 2)


def test_a_row_whose_estimate_does_not_fit_the_time_left_is_not_started(tmp_path):
    path = tmp_path / "measured.json"
    path.write_text(json.dumps({"runs": {}, "rows": {}}))
    measure.run_rows([CPU_ROW], str(path), "run", deadline=time.monotonic() + 5)
    assert json.loads(path.read_text())["rows"] == {}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The results file after CPU_ROW was measured on the CPU at tiny shapes, beside a row measured before."""
    path = tmp_path_factory.mktemp("gpu_run") / "measured.json"
    before = json.loads(open(gpu_run.MEASURED).read())
    path.write_text(
        json.dumps({"runs": {**before["runs"], "now": {}}, "rows": {"1B/cudnn": before["rows"]["1B/cudnn"]}})
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(measure.EXTRA, TINY)
        patch.setenv("JAX_PLATFORMS", "cpu")
        measure.run_rows([CPU_ROW], str(path), "now", deadline=time.monotonic() + 600)
    return path


@pytest.mark.slow
def test_one_row_measured_on_a_cpu_joins_the_rows_measured_before(measured):
    found = json.loads(measured.read_text())["rows"]
    assert set(found) == {"1B/cudnn", CPU_ROW.name}
    row = found[CPU_ROW.name]
    assert "error" not in row, row["error"]
    assert row["run"] == "now" and row["device"] == "cpu" and len(row["losses"]) == 11
    assert row["step_seconds"] == statistics.median(row["step_seconds_all"][3:])
    assert row["tokens_per_step"] == 2 * 32
    assert row["mfu"] == pytest.approx(row["model_flops_per_step"] / row["step_seconds"] / 1e12)
    assert row["remat"]["requested"] == "auto" and row["remat"]["policy"] == "none"  # a CPU reports no limit
    assert row["attention"]["resolved"] == "xla" and row["fused_attention_calls"] == 0
    assert 0 < len(row["trace"]["top"]) <= 10 and row["trace"]["kernel_ms_per_step"] > 0


@pytest.mark.slow
def test_render_shows_a_new_row_with_its_policy_and_its_kernels(measured, monkeypatch):
    written = {}
    monkeypatch.setattr(render, "write_result", lambda name, title, body, machine: written.update(body=body) or "")
    render.render(gpu_run.PREDICTED, str(measured))
    assert "| 125M | xla | auto → none | scanned | 0.1 | no | on | " in written["body"]
    assert f"`{CPU_ROW.name}`: step " in written["body"]


@pytest.mark.slow
def test_calibrate_records_a_new_rows_step_with_the_kernels_of_its_program(measured, monkeypatch, tmp_path):
    calibration, alone = tmp_path / "calibration.json", tmp_path / "measured.json"
    calibration.write_text(open(gpu_run.CALIBRATION).read())
    results = json.loads(measured.read_text())
    alone.write_text(json.dumps({**results, "rows": {CPU_ROW.name: results["rows"][CPU_ROW.name]}}))
    monkeypatch.setattr(gpu_run, "MEASURED", str(alone))
    monkeypatch.setattr(gpu_run, "CALIBRATION", str(calibration))
    monkeypatch.setattr(gpu_run, "train_text", lambda *args: pytest.fail("a row with its kernels is not compiled"))
    gpu_run.calibrate("h200:1", str(tmp_path), None)
    steps = {step["row"]: step for step in json.loads(calibration.read_text())["steps"]}
    row = results["rows"][CPU_ROW.name]
    assert steps[f"gpu_run {CPU_ROW.name}"]["kernels"] == row["kernels"]
    assert steps[f"gpu_run {CPU_ROW.name}"]["step_seconds"] == row["step_seconds"]
    assert "gpu_run 1B/cudnn" in steps  # the steps recorded before stay
