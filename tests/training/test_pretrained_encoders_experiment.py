"""The pre-trained encoders experiment (experiments/pretrained_encoders.py): the ELECTRA table over
pre-training steps and the summary it publishes, from fake finished cells, without training."""

import json
import pathlib

import pytest
from project_scripts import load_script

from seqjax import config as config_lib

experiment = load_script("experiments/pretrained_encoders.py", "pretrained_encoders_experiment")

DETECTION = {"auc": 0.8, "loss": 0.33, "base_rate_loss": 0.38, "accuracy": 0.87, "precision": 0.5, "recall": 0.3}


def evaluation(ppl: float, base_rate: float) -> dict:
    metrics = {f"discriminator_{k}": v for k, v in DETECTION.items()}
    return {"token_perplexity": ppl, "discriminator_base_rate": base_rate, **metrics}


def write_cell(sweep, kind: str, seed: int, ppl: float) -> None:
    """A finished (kind, seed) cell: pre-training evaluated on dev at steps 10 and 20 (step 20 twice,
    the periodic and the final evaluation) and on test, and its fine-tuning scored."""
    for run_dir, cfg in (
        (sweep.pretrain_dir(kind, seed), sweep.pretrain_config(kind, seed)),
        (sweep.finetune_dir(kind, seed), sweep.finetune_config(kind, seed)),
    ):
        (path := pathlib.Path(run_dir)).mkdir(parents=True)
        (path / "config.json").write_text(json.dumps(config_lib.to_dict(cfg)))
        (path / "train_seconds.json").write_text(json.dumps({"seconds": 120.0}))
    pretrain = pathlib.Path(sweep.pretrain_dir(kind, seed))
    logs = [
        {"step": 10, "split": "valid", **evaluation(ppl * 2, 0.1)},
        {"step": 20, "split": "valid", **evaluation(ppl + 100, 0.2)},
        {"step": 20, "split": "valid", **evaluation(ppl, 0.2)},
    ]
    (pretrain / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs))
    (pretrain / "summary.json").write_text(json.dumps({"steps": 20, "test": evaluation(ppl + 1, 0.125)}))
    finetune = pathlib.Path(sweep.finetune_dir(kind, seed))
    (finetune / "summary.json").write_text(json.dumps({"steps": 10, "test": {"token_perplexity": 50.0}}))
    scores = {"bleu": 12.0 + seed, "rougeL": 0.25, "copy_bleu": 18.52, "copy_rougeL": 0.184, "perplexity": 50.0}
    (finetune / "scores.json").write_text(json.dumps(scores))


@pytest.fixture
def finished(tmp_path):
    sweep = experiment.Sweep(str(tmp_path / "cells"), pretrain_steps=20, finetune_steps=10, generator_width=0.25)
    for seed, ppl in ((0, 200.0), (1, 210.0)):
        write_cell(sweep, "electra", seed, ppl)
    return sweep


def test_the_electra_table_has_a_row_per_dev_evaluation_then_test_with_the_last_record_of_a_step(finished):
    text, _, _ = experiment.report(finished, [0, 1])
    rows = [line for line in text.splitlines() if line.startswith(("| dev", "| test"))]
    assert [row.split(" | ")[0] for row in rows] == ["| dev, 10", "| dev, 20", "| test, 20"]
    # generator ppl (mean ± half range of the two seeds), AUC, loss, base rate's loss, accuracy, always original
    same = " | ".join(f"{v:.3f} ± 0.000" for v in (0.8, 0.33, 0.38, 0.87, 0.8, 0.5, 0.3))
    assert rows[1] == f"| dev, 20 | 205.0 ± 5.0 | {same} |"
    assert rows[2].split(" | ")[6] == "0.875 ± 0.000"  # always original: 1 − the test base rate


def test_the_report_names_every_run_behind_it_and_each_seed_s_figures(finished):
    _, run_dirs, figures = experiment.report(finished, [0, 1])
    assert run_dirs == [
        finished.pretrain_dir("electra", s) if i % 2 == 0 else finished.finetune_dir("electra", s)
        for s in (0, 1)
        for i in (0, 1)
    ]
    assert figures["per_seed"]["electra"][1]["finetuned_test"]["bleu"] == 13.0
    assert figures["electra_evaluations_per_seed"][0]["dev, 10"]["token_perplexity"] == 400.0
    assert figures["per_seed"]["masked_lm"] == {}
