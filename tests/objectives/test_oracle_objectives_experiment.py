"""The oracle-objectives sweep (experiments/oracle_objectives.py): its schedules, its table and
its resume, checked without training."""

import json
import math
import os
import pathlib

import pytest
from project_scripts import load_script

from seqjax import config as config_lib
from seqjax.objectives import build_objective
from seqjax.objectives.schedules import gold_probability

sweep = load_script("experiments/oracle_objectives.py", "oracle_objectives_experiment")
sweeps = load_script("experiments/sweeps.py", "experiment_sweeps")


@pytest.mark.parametrize("steps", [6, 1200])
@pytest.mark.parametrize("name", sweep.OBJECTIVES)
def test_every_objective_config_passes_the_library_checks(name, steps):
    build_objective(sweep.objective_config(name, steps))


@pytest.mark.parametrize("name", ["ss_linear", "ss_exponential", "ss_inverse_sigmoid"])
def test_every_decay_starts_near_gold_and_feeds_gold_half_the_time_at_mid_run(name):
    steps = 1200
    o = sweep.objective_config(name, steps).group("scheduled_sampling")

    def epsilon(step):
        return float(gold_probability(o.schedule, step, k=o.k, c=o.c, eps_min=o.eps_min))

    assert epsilon(0) >= 0.99
    assert epsilon(steps // 2) == pytest.approx(0.5, abs=1e-3)
    assert epsilon(steps) < 0.3


def test_inverse_sigmoid_k_solves_k_log_k_equals_the_midpoint():
    k = sweep.inverse_sigmoid_k(600.0)
    assert k >= 1.0 and k * math.log(k) == pytest.approx(600.0, rel=1e-9)


def test_mean_and_half_range_of_two_seeds():
    assert sweeps.mean_and_half_range([1.0, 3.0]) == (2.0, 1.0)
    assert sweeps.mean_and_half_range([4.0]) == (4.0, 0.0)


def test_table_shows_mean_plus_minus_half_range_per_objective():
    runs = [
        {"oracle NLL of samples": 5.0, "test NLL": 4.0, "well-formed samples": 0.9},
        {"oracle NLL of samples": 5.5, "test NLL": 4.2, "well-formed samples": 1.0},
    ]
    table = sweep.results_table({"teacher_forcing": runs}, {"teacher_forcing": "-"})
    header, rule, row = table.splitlines()
    assert header == "| objective | settings | seeds | oracle NLL of samples | test NLL | well-formed samples |"
    assert rule == "|---|---|---|---|---|---|"
    assert row == "| teacher_forcing | - | 2 | 5.250 ± 0.250 | 4.100 ± 0.100 | 95.0 ± 5.0% |"


def write_run(run_dir: pathlib.Path, cfg, summary=None) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config_lib.to_dict(cfg)))
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary))


SUMMARY = {"test": {"nll": 4.0}, "samples": {"oracle_nll": 5.0, "oracle_well_formed": 0.5}}


def test_finished_run_is_read_and_unfinished_or_absent_run_is_not(tmp_path):
    cfg = sweep.run_config(sweep.quick_config(), "ss_linear", seed=1)
    assert sweeps.finished_summary(str(tmp_path / "absent"), cfg) is None
    write_run(tmp_path / "cut_off", cfg)
    assert sweeps.finished_summary(str(tmp_path / "cut_off"), cfg) is None
    write_run(tmp_path / "done", cfg, SUMMARY)
    assert sweeps.finished_summary(str(tmp_path / "done"), cfg) == SUMMARY


def test_run_directory_of_another_config_is_refused(tmp_path):
    write_run(tmp_path / "run", sweep.run_config(sweep.quick_config(), "ss_linear", seed=0), SUMMARY)
    with pytest.raises(ValueError, match="another config"):
        sweeps.finished_summary(str(tmp_path / "run"), sweep.run_config(sweep.quick_config(), "ss_linear", seed=1))


def test_sweep_reuses_finished_runs_without_training(tmp_path, monkeypatch):
    import seqjax.training.loop

    def no_training(cfg, workdir):
        raise AssertionError(f"retrained {workdir}")

    monkeypatch.setattr(seqjax.training.loop, "train", no_training)
    base = sweep.quick_config()
    for seed in (0, 1):
        write_run(tmp_path / f"gradient_penalty-seed{seed}", sweep.run_config(base, "gradient_penalty", seed), SUMMARY)
    results = sweep.sweep(base, ["gradient_penalty"], [0, 1], str(tmp_path))
    expected = {"oracle NLL of samples": 5.0, "test NLL": 4.0, "well-formed samples": 0.5}
    assert results == {"gradient_penalty": [expected, expected]}


@pytest.mark.parametrize("flag, text", [("--seeds", "0,0"), ("--seeds", "a"), ("--objectives", "beam_search")])
def test_bad_flags_are_refused_before_training(flag, text, tmp_path):
    with pytest.raises(ValueError, match=flag):
        sweep.main(["--quick", "--workdir", os.fspath(tmp_path), flag, text])


def test_the_sweep_publishes_each_seed_s_measures_and_settings_beside_its_table(tmp_path, monkeypatch):
    import seqjax.training.loop

    monkeypatch.setattr(seqjax.training.loop, "train", lambda cfg, workdir: pytest.fail(f"retrained {workdir}"))
    monkeypatch.setattr(sweep, "oracle_entropy", lambda: 4.5)
    workdir, results = tmp_path / "sweep", tmp_path / "results"
    for seed, nll in ((0, 4.0), (1, 4.2)):
        summary = {"test": {"nll": nll}, "samples": {"oracle_nll": 5.0, "oracle_well_formed": 0.5}}
        write_run(
            workdir / f"gradient_penalty-seed{seed}",
            sweep.run_config(sweep.get_config(), "gradient_penalty", seed),
            summary,
        )
    sweep.main(["--workdir", str(workdir), "--objectives", "gradient_penalty", "--results-dir", str(results)])
    written = json.loads((results / "oracle_objectives.json").read_text())
    assert written["figures"]["per_seed"]["gradient_penalty"]["1"]["test NLL"] == 4.2
    assert written["figures"]["settings"] == {"gradient_penalty": "λ = 0.5"}
    assert [r["run"] for r in written["runs"]] == ["gradient_penalty-seed0", "gradient_penalty-seed1"]
    assert (
        "| gradient_penalty | λ = 0.5 | 2 | 5.000 ± 0.000 | 4.100 ± 0.100 | 50.0 ± 0.0% |"
        in (results / "oracle_objectives.md").read_text()
    )
