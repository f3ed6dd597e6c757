"""The back-translation experiment (experiments/back_translation.py): the corpus its stages write
is found again by the runs they train, and its report publishes what the finished runs scored,
checked without training."""

import json

import pytest
from project_scripts import load_script

from seqjax import config as config_lib
from seqjax.data.corpora.sources import validate_data_config

experiment = load_script("experiments/back_translation.py", "back_translation_experiment")


@pytest.mark.parametrize("stage", ["backward", "forward"])
def test_a_relative_workdir_names_its_corpus_even_with_seqjax_data_set(stage, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path / "corpora"))
    corpus = tmp_path / "runs" / "bt" / "corpus"
    corpus.mkdir(parents=True)
    for name in ("parallel.en", "parallel.de", "mono.de"):
        (corpus / name).write_text("a b\n")
    trained = []
    monkeypatch.setattr(experiment.sweeps, "trained_summary", lambda cfg, run_dir, label: trained.append(cfg))
    monkeypatch.setattr(experiment, "scores", lambda run_dir: {})
    experiment.main(["--stage", stage, "--variants", "half", "--workdir", "runs/bt"])
    (cfg,) = trained
    validate_data_config(cfg.data, ["train"])


def finished_forward(workdir, variant, seed, bleu, steps=experiment.DEFAULT_STEPS):
    run_dir = workdir / f"forward-{variant}-seed{seed}"
    run_dir.mkdir(parents=True)
    cfg = experiment.model_config(steps, experiment.forward_train(str(workdir), variant), seed=seed)
    (run_dir / "config.json").write_text(json.dumps(config_lib.to_dict(cfg)))
    (run_dir / "summary.json").write_text(json.dumps({"steps": steps, "test": {"word_perplexity": 800.0}}))
    scores = {"bleu": bleu, "copy_bleu": 18.52, "rougeL": 0.3, "copy_rougeL": 0.184, "word_perplexity": 800.0}
    (run_dir / "scores.json").write_text(json.dumps(scores))


@pytest.fixture
def finished(tmp_path):
    """A back-translation workdir: the corpus split, a beam back-translation that left 2 of 10 lines
    blank, and forward runs of the half (seeds 0, 1) and the beam corpus (seed 1)."""
    workdir = tmp_path / "bt"
    corpus = workdir / "corpus"
    corpus.mkdir(parents=True)
    for name in ("parallel.en", "parallel.de", "mono.de", "bt_beam.en", "bt_beam.de"):
        (corpus / name).write_text("a b\n")
    made = {"decoding": "beam 2", "lines": 10, "seconds": 3.0, "blank_outputs": 2, "synthetic_pairs": 8}
    (corpus / "bt_beam.json").write_text(json.dumps(made))
    for variant, seed, bleu in (("half", 0, 16.0), ("half", 1, 17.0), ("beam", 1, 14.5)):
        finished_forward(workdir, variant, seed, bleu)
    return workdir


def test_the_report_publishes_the_gain_by_seed_and_the_untranslated_lines(finished, tmp_path):
    results = tmp_path / "results"
    experiment.main(["--report", "--workdir", str(finished), "--results-dir", str(results)])
    table = (results / "back_translation.md").read_text()
    assert "Back-translation (beam 2): 10 lines in 3 s, 2 left blank." in table
    assert "| parallel half | 0, 1 | 16.50 ± 0.50 | 18.52 ± 0.00 | - |" in table
    assert "| + back-translation, beam 2 | 1 | 14.50 | 18.52 | -2.50 |" in table  # paired with the half's seed 1
    written = json.loads((results / "back_translation.json").read_text())
    assert written["figures"]["forward_per_seed"]["half"]["1"]["bleu"] == 17.0
    assert written["figures"]["back_translations"]["beam"]["blank_outputs"] == 2
    assert [r["run"] for r in written["runs"]] == ["forward-half-seed0", "forward-half-seed1", "forward-beam-seed1"]


def test_a_report_at_other_steps_publishes_under_its_own_name(tmp_path):
    workdir, results = tmp_path / "bt_4000", tmp_path / "results"
    finished_forward(workdir, "all", 0, 28.0, steps=4000)
    experiment.main(["--report", "--steps", "4000", "--workdir", str(workdir), "--results-dir", str(results)])
    names = sorted(p.name for p in results.iterdir())
    assert names == ["back_translation_4000_steps.json", "back_translation_4000_steps.md"]
    assert "| all real pairs (upper bound) | 0 | 28.00 |" in (results / "back_translation_4000_steps.md").read_text()
