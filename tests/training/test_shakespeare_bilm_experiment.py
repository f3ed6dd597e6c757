"""The BiLM seed sweep (experiments/shakespeare_bilm.py): its report and the summary it publishes,
from fake finished cells, without training."""

import json

from project_scripts import load_script

from seqjax import config as config_lib

experiment = load_script("experiments/shakespeare_bilm.py", "shakespeare_bilm_experiment")


def finished_cell(root, variant, seed, forward, backward=None):
    run_dir = root / f"{variant}-seed{seed}"
    run_dir.mkdir(parents=True)
    cfg = experiment.cell_config(variant, seed, [])
    (run_dir / "config.json").write_text(json.dumps(config_lib.to_dict(cfg)))
    split = {"token_perplexity": forward} | ({} if backward is None else {"backward_token_perplexity": backward})
    (run_dir / "summary.json").write_text(json.dumps({"steps": 1200, "valid": split, "test": split}))


def test_the_report_publishes_each_direction_and_the_gap_by_seed_naming_the_unfinished(tmp_path):
    root, results = tmp_path / "cells", tmp_path / "results"
    finished_cell(root, "bilm", 0, 5.0, 5.05)
    finished_cell(root, "bilm", 1, 6.0, 6.12)
    finished_cell(root, "lstm", 0, 5.5)
    experiment.main(["--report", "--seeds", "0,1", "--workdir-root", str(root), "--results-dir", str(results)])
    table = (results / "shakespeare_bilm.md").read_text()
    assert "| BiLM, backward direction | 2 | 5.585 ± 0.535 | 5.585 ± 0.535 |" in table
    assert "| backward / forward − 1 | 2 | 1.50 ± 0.50% | 1.50 ± 0.50% |" in table  # 1% and 2%
    assert "not finished: lstm-seed1" in table
    written = json.loads((results / "shakespeare_bilm.json").read_text())
    assert written["figures"]["lstm forward"]["test"] == [5.5]
    assert [r["run"] for r in written["runs"]] == ["bilm-seed0", "bilm-seed1", "lstm-seed0"]
