"""The summaries experiments write under experiments/results/ (experiments/summaries.py): what
they record of a finished run, and that the committed file names nothing outside the repository.
Checked on fake finished run directories, without training."""

import json
import os

import pytest
from project_scripts import load_script

from seqjax import config as config_lib
from seqjax.config import Config, TrainConfig

summaries = load_script("experiments/summaries.py", "experiment_summaries")
sweeps = load_script("experiments/sweeps.py", "experiment_sweeps")

SUMMARY = {
    "steps": 10,
    "parameters": 1234,
    "valid": {"nll": 0.5, "token_perplexity": 1.6487, "word_perplexity": 20.0},
    "test": {"nll": 0.6, "token_perplexity": 1.8221, "word_perplexity": 25.5},
    "samples": {"grammatical": 0.25},
}
TRAIN_LOGS = [
    {"step": 5, "split": "train", "loss": 2.0, "tokens_per_sec": 100.0},
    {"step": 6, "split": "valid", "nll": 0.7},
    {"step": 10, "split": "train", "loss": 1.5, "tokens_per_sec": 300.0},
    {"step": 15, "split": "train", "loss": 1.25, "tokens_per_sec": 200.0},
]


def finished_run(run_dir, cfg=None, summary=SUMMARY, logs=TRAIN_LOGS):
    """A run directory as `seqjax train` leaves it: config.json, metrics.jsonl, summary.json."""
    os.makedirs(run_dir)
    cfg = cfg or Config(train=TrainConfig(steps=10, seed=3))
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(config_lib.to_dict(cfg), f)
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in logs))
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f)
    return str(run_dir)


def test_a_run_record_keeps_the_changed_config_keys_the_seed_the_summary_and_the_train_logs(tmp_path):
    record = summaries.run_record(finished_run(tmp_path / "gru"))
    assert record["run"] == "gru"
    assert record["config"] == ["train.steps = 10", "train.seed = 3"]
    assert (record["seed"], record["summary"]) == (3, SUMMARY)
    assert record["median_train_tokens_per_sec"] == 200.0  # the median of 100, 300, 200
    assert record["last_train_loss"] == 1.25
    assert record["elapsed_seconds_config_to_summary"] >= 0


def test_a_timed_run_reports_its_train_seconds_instead_of_the_file_times(tmp_path):
    run_dir = finished_run(tmp_path / "run")
    with open(os.path.join(run_dir, "train_seconds.json"), "w") as f:
        json.dump({"seconds": 61.5}, f)
    record = summaries.run_record(run_dir)
    assert record["train_seconds"] == {"seconds": 61.5}
    assert "elapsed_seconds_config_to_summary" not in record
    assert summaries.run_figures(record)["wall_seconds"] == 61.5


def test_a_counted_run_s_wall_time_adds_its_counting_to_its_scoring(tmp_path):
    record = summaries.run_record(finished_run(tmp_path / "kn", summary=SUMMARY | {"fit_seconds": 30.0}, logs=[]))
    assert summaries.run_figures(record)["wall_seconds"] == 30.0 + record["elapsed_seconds_config_to_summary"]


def test_an_unfinished_run_is_refused(tmp_path):
    run_dir = finished_run(tmp_path / "run")
    os.remove(os.path.join(run_dir, "summary.json"))
    with pytest.raises(ValueError, match="no finished run"):
        summaries.run_record(run_dir)


def test_the_script_writes_the_runs_table_and_the_json_it_comes_from(tmp_path):
    first = finished_run(tmp_path / "runs" / "first")
    second = finished_run(tmp_path / "runs" / "second", Config(train=TrainConfig(seed=1)))
    out = tmp_path / "results"
    summaries.main(["chars", first, second, "--results-dir", str(out)])
    written = json.loads((out / "chars.json").read_text())
    assert written["experiment"] == "chars"
    assert {"cpu", "cores", "memory_gib", "load_average_1_5_15_min", "jax", "flax", "numpy"} <= set(written["machine"])
    assert [r["run"] for r in written["runs"]] == ["first", "second"]
    assert [f["seed"] for f in written["figures"]] == [3, 1]
    assert written["figures"][0]["test_perplexity"] == 1.8221
    table = (out / "chars.md").read_text()
    assert "| first | 3 | 1,234 | 10 | 1.649 (0.500) | 1.822 (0.600) | 25.5 | 25.0% | 1.250 | 200 |" in table


def test_the_summary_names_the_working_directory_and_the_data_root_relatively(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path / "corpora"))
    text = f"{tmp_path}/runs/bt/corpus/parallel and {tmp_path}/corpora/mt/gettext-en-de/train"
    assert summaries.portable(text) == "runs/bt/corpus/parallel and $SEQJAX_DATA/mt/gettext-en-de/train"


def test_a_quick_sweep_publishes_to_its_workdir_unless_told_where():
    assert sweeps.results_dir(None, "runs/x", quick=True) == "runs/x"
    assert sweeps.results_dir(None, "runs/x") == summaries.RESULTS_DIR
    assert sweeps.results_dir("elsewhere", "runs/x", quick=True) == "elsewhere"


def test_a_sweep_publishes_its_table_figures_and_run_records(tmp_path):
    workdir = tmp_path / "sweep"
    cell = finished_run(workdir / "lstm-seed0")
    outside = finished_run(tmp_path / "checkpoint")
    sweeps.publish("toy", "| a |\n", str(workdir), [cell, outside], {"lstm": [1.0]}, str(tmp_path / "results"))
    written = json.loads((tmp_path / "results" / "toy.json").read_text())
    assert written["figures"] == {"lstm": [1.0]}
    assert [r["run"] for r in written["runs"]] == ["lstm-seed0", outside]
    assert (tmp_path / "results" / "toy.md").read_text().endswith("| a |\n")
    assert (workdir / "table.md").read_text() == "| a |\n"
