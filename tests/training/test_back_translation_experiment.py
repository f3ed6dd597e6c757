"""The back-translation experiment (experiments/back_translation.py): the corpus its stages write
is found again by the runs they train, checked without training."""

import pytest
from project_scripts import load_script

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
    monkeypatch.setattr(experiment, "trained_summary", lambda cfg, run_dir, label: trained.append(cfg))
    monkeypatch.setattr(experiment, "scores", lambda run_dir: {})
    experiment.main(["--stage", stage, "--variants", "half", "--workdir", "runs/bt"])
    (cfg,) = trained
    validate_data_config(cfg.data, ["train"])
