"""The translation-objectives sweep (experiments/translation_objectives.py): its fine-tuning
configs, its table and its resume, checked without training or decoding."""

import functools
import json

import pytest
from project_scripts import load_script

from seqjax import config as config_lib
from seqjax.config import Config, TrainConfig
from seqjax.objectives import build_objective
from seqjax.objectives.reinforce import mixer_delta
from seqjax.objectives.schedules import gold_probability

sweep = load_script("experiments/translation_objectives.py", "translation_objectives_experiment")


@pytest.mark.parametrize("steps", [4, 100])
@pytest.mark.parametrize("name", sweep.OBJECTIVES)
def test_every_objective_config_passes_the_library_checks(name, steps):
    build_objective(sweep.objective_config(name, steps))


def test_scheduled_sampling_feeds_gold_first_and_half_the_time_at_the_end():
    o = sweep.objective_config("scheduled_sampling", 100).group("scheduled_sampling")

    def epsilon(step):
        return float(gold_probability(o.schedule, step, k=o.k, c=o.c, eps_min=o.eps_min))

    assert epsilon(0) == pytest.approx(1.0)
    assert epsilon(50) == pytest.approx(0.75)
    assert epsilon(100) == pytest.approx(0.5) and epsilon(1000) == pytest.approx(0.5)


def test_mixer_hands_four_more_tokens_to_reinforce_each_quarter():
    o = sweep.objective_config("mixer", 100).group("mixer")
    assert (o.delta_start, o.delta_growth, o.delta_every) == (4, 4, 25)
    delta = functools.partial(
        mixer_delta, delta_start=o.delta_start, delta_growth=o.delta_growth, delta_every=o.delta_every
    )
    assert [int(delta(step)) for step in (0, 24, 25, 50, 75, 99)] == [4, 4, 8, 12, 16, 16]


def test_unknown_objective_is_refused():
    with pytest.raises(ValueError, match="'beam_search_optimization'"):
        sweep.objective_config("beam_search_optimization", 100)


def test_run_fine_tunes_the_checkpoint_with_its_own_seed_and_steps():
    base = Config(train=TrainConfig(steps=1500, seed=0, num_printed_samples=4))
    cfg = sweep.run_config(base, "runs/base", "self_critical", seed=1, steps=100)
    assert (cfg.train.init_from, cfg.train.steps, cfg.train.seed, cfg.train.num_printed_samples) == (
        "runs/base",
        100,
        1,
        0,
    )
    assert (cfg.optim.learning_rate, cfg.optim.schedule) == (1e-4, "constant")
    assert (cfg.objective.kind, cfg.objective.group("reinforce").baseline) == ("reinforce", "self_critical")
    assert cfg.model == base.model and cfg.data == base.data


def report(bleu, rouge):
    return {str(b): {"bleu": bleu + b, "rougeL": rouge, "copy_bleu": 18.5, "copy_rougeL": 0.184} for b in sweep.BEAMS}


def test_table_has_copy_baseline_and_mean_plus_minus_half_range_per_model_and_beam():
    results = {
        "transformer": {"teacher_forcing": [report(10.0, 0.3), report(12.0, 0.3)]},
        "attention": {"teacher_forcing": [report(5.0, 0.1)]},
    }
    lines = sweep.results_table(results, "BLEU", "bleu", 2).splitlines()
    assert lines[2] == (
        "| objective | transformer beam 1 | transformer beam 2 | transformer beam 3 | "
        "attention beam 1 | attention beam 2 | attention beam 3 | seeds |"
    )
    assert lines[4] == "| copy the source | 18.50 | 18.50 | 18.50 | 18.50 | 18.50 | 18.50 | - |"
    assert lines[5] == ("| teacher_forcing | 12.00 ± 1.00 | 13.00 ± 1.00 | 14.00 ± 1.00 | 6.00 | 7.00 | 8.00 | 1/2 |")


def test_perplexity_table_has_one_column_per_model_and_no_copy_row():
    def with_perplexity(perplexity):
        return {beam: {**scores, "perplexity": perplexity} for beam, scores in report(5.0, 0.1).items()}

    results = {
        "transformer": {"mixer": [with_perplexity(60.0), with_perplexity(64.0)]},
        "attention": {"mixer": [with_perplexity(200.0), with_perplexity(210.0)]},
    }
    lines = sweep.results_table(results, "perplexity", "perplexity", 1, beams=(1,)).splitlines()
    assert lines[2:] == [
        "| objective | transformer | attention | seeds |",
        "|---|---|---|---|",
        "| mixer | 62.0 ± 2.0 | 205.0 ± 5.0 | 2 |",
    ]


def finished_sweep(tmp_path, monkeypatch):
    """A checkpoint and its gradient-penalty fine-tuning (seed 3, 10 steps) as finished runs with
    their decodes; training fails the test."""
    import seqjax.training.loop

    def no_training(cfg, workdir):
        raise AssertionError(f"retrained {workdir}")

    monkeypatch.setattr(seqjax.training.loop, "train", no_training)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    base = Config()
    (checkpoint / "config.json").write_text(json.dumps(config_lib.to_dict(base)))
    (checkpoint / "decoding.json").write_text(json.dumps(report(5.0, 0.1)))
    (checkpoint / "summary.json").write_text(json.dumps({"test": {"perplexity": 40.0}}))
    monkeypatch.setitem(sweep.CHECKPOINTS, "transformer", str(checkpoint))
    run_dir = tmp_path / "sweep" / "transformer-gradient_penalty-seed3"
    run_dir.mkdir(parents=True)
    cfg = sweep.run_config(base, str(checkpoint), "gradient_penalty", 3, 10)
    (run_dir / "config.json").write_text(json.dumps(config_lib.to_dict(cfg)))
    (run_dir / "summary.json").write_text(json.dumps({"test": {"perplexity": 50.0}}))
    (run_dir / "decoding.json").write_text(json.dumps(report(7.0, 0.2)))


def test_sweep_reads_finished_runs_and_decodes_without_retraining(tmp_path, monkeypatch):
    finished_sweep(tmp_path, monkeypatch)
    results = sweep.sweep(["transformer"], ["gradient_penalty"], [3], 10, str(tmp_path / "sweep"))
    rows = results["transformer"]
    assert rows["checkpoint (no fine-tuning)"][0]["1"]["bleu"] == 6.0
    assert rows["checkpoint (no fine-tuning)"][0]["2"]["perplexity"] == 40.0
    assert rows["gradient_penalty"][0]["3"] == {
        "bleu": 10.0,
        "rougeL": 0.2,
        "copy_bleu": 18.5,
        "copy_rougeL": 0.184,
        "perplexity": 50.0,
    }


def test_the_sweep_publishes_its_tables_with_the_checkpoint_and_fine_tuning_runs(tmp_path, monkeypatch):
    finished_sweep(tmp_path, monkeypatch)
    results = tmp_path / "results"
    args = ["--models", "transformer", "--objectives", "gradient_penalty", "--seeds", "3", "--steps", "10"]
    sweep.main([*args, "--workdir", str(tmp_path / "sweep"), "--results-dir", str(results)])
    written = json.loads((results / "translation_objectives.json").read_text())
    assert [r["run"] for r in written["runs"]] == [str(tmp_path / "checkpoint"), "transformer-gradient_penalty-seed3"]
    assert written["figures"]["transformer"]["gradient_penalty"][0]["2"]["bleu"] == 9.0
    table = (results / "translation_objectives.md").read_text()
    assert "| copy the source | 18.50 | 18.50 | 18.50 | - |" in table
    assert "| gradient_penalty | 8.00 | 9.00 | 10.00 | 1 |" in table
