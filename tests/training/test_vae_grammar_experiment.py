"""The VAE sweep (experiments/vae_grammar.py): its report and the summary it publishes, from fake
finished runs, without training."""

import json

from project_scripts import load_script

from seqjax import config as config_lib

experiment = load_script("experiments/vae_grammar.py", "vae_grammar_experiment")

HOMOTOPY = {
    "first": "A b.",
    "second": "C d.",
    "points": [[0.0, "A b."], [1.0, "C d."]],
    "distinct": 2,
    "grammatical": 1.0,
}


def finished_run(workdir, variant, seed, kl):
    run_dir = workdir / f"{variant}-seed{seed}"
    run_dir.mkdir(parents=True)
    cfg = experiment.run_config(variant, seed, experiment.STEPS, quick=True)
    (run_dir / "config.json").write_text(json.dumps(config_lib.to_dict(cfg)))
    test = {"kl": kl, "reconstruction_gap": 2 * kl, "elbo": -20.0, "token_perplexity": 1.7}
    (run_dir / "summary.json").write_text(json.dumps({"steps": 4, "test": test, "samples": {"grammatical": 0.5}}))
    logs = [{"step": step, "split": "train", "kl": kl * step} for step in (1, 2, 3, 4)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logs))
    (run_dir / "homotopies.json").write_text(json.dumps([HOMOTOPY] * len(experiment.PAIRS)))


def test_a_quick_report_publishes_each_variant_s_measures_by_seed_into_its_workdir(tmp_path):
    workdir = tmp_path / "vae"
    finished_run(workdir, "annealed", 0, 2.0)
    finished_run(workdir, "annealed", 2, 3.0)
    experiment.main(["--report", "--quick", "--workdir", str(workdir)])
    table = (workdir / "vae_grammar.md").read_text()
    assert "| annealed | 0, 2 | 2.50 ± 0.50 / 5.00 ± 1.00 / 7.50 ± 1.50 / 10.00 ± 2.00 | 2.500 ± 0.500 |" in table
    assert "| plain | none finished |" in table
    written = json.loads((workdir / "vae_grammar.json").read_text())
    assert written["figures"]["per_seed"]["annealed"]["2"]["gap"] == 6.0
    assert written["figures"]["homotopies_shown"]["annealed"][0] == 0
    assert [r["run"] for r in written["runs"]] == ["annealed-seed0", "annealed-seed2"]
