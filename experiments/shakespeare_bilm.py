"""ELMo's bidirectional LM on character-level Shakespeare: a forward and a backward LSTM LM
trained jointly, sharing the character embedding and the output layer.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/shakespeare/{train,valid,test}.txt` (the splits of `shakespeare_lstm.py`):

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/shakespeare_bilm.py

Each direction is the LSTM of `shakespeare_lstm.py` (2 layers of 256 units), with its data,
optimizer and 1,200 steps, so the forward direction's perplexity compares with that run's;
the summary reports both directions' exact per-character perplexities. On a row the backward
LM is the forward one's mirror image (`seqjax.objectives.bidirectional`): each reads one real
character at the row's edge it starts from and scores as many characters as the other.

The seed sweep, one (variant, seed) cell per process, then the table from finished runs:

    python experiments/shakespeare_bilm.py --variants bilm --seeds 0 --workdir-root runs/bilm
    python experiments/shakespeare_bilm.py --variants lstm --seeds 0 --workdir-root runs/bilm
    python experiments/shakespeare_bilm.py --report --seeds 0,1,2 --workdir-root runs/bilm

(variant bilm is this config, lstm is `shakespeare_lstm.py` alone; `--set` overrides apply to
both, e.g. `--set train.steps=4` for a smoke test). The table is also written, with the runs'
records, to experiments/results/shakespeare_bilm.json and .md (`--results-dir` elsewhere).
"""

import argparse
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shakespeare_lstm  # noqa: E402
import sweeps  # noqa: E402

from seqjax import config as config_lib  # noqa: E402
from seqjax.config import Config  # noqa: E402
from seqjax.objectives import ObjectiveConfig  # noqa: E402

VARIANTS = ("bilm", "lstm")


def get_config() -> Config:
    base = shakespeare_lstm.get_config()
    return dataclasses.replace(
        base,
        model=dataclasses.replace(base.model, kind="bilm"),
        objective=ObjectiveConfig(kind="bidirectional_lm"),
    )


def cell_config(variant: str, seed: int, sets: list[str]) -> Config:
    """The run of `variant` (bilm | lstm) at train.seed=`seed`, with the `--set` overrides."""
    base = get_config() if variant == "bilm" else shakespeare_lstm.get_config()
    return config_lib.override(base, [*sets, f"train.seed={seed}"])


def cell_dir(root: str, variant: str, seed: int) -> str:
    return os.path.join(root, f"{variant}-seed{seed}")


def report(root: str, seeds: list[int], sets: list[str]) -> tuple[str, list[str], dict]:
    """(the table of the finished runs under `root`, seeds not finished left out and named; those
    runs' directories; each row's perplexities per split, in the order of their seeds)."""
    ppl: dict[str, dict[str, list[float]]] = {}
    missing, run_dirs = [], []
    for variant in VARIANTS:
        for seed in seeds:
            summary = sweeps.finished_summary(cell_dir(root, variant, seed), cell_config(variant, seed, sets))
            if summary is None:
                missing.append(f"{variant}-seed{seed}")
                continue
            run_dirs.append(cell_dir(root, variant, seed))
            for split in ("valid", "test"):
                rows = {"forward": summary[split]["token_perplexity"]}
                if variant == "bilm":
                    rows["backward"] = summary[split]["backward_token_perplexity"]
                    rows["gap"] = rows["backward"] / rows["forward"] - 1
                for name, value in rows.items():
                    ppl.setdefault(f"{variant} {name}", {}).setdefault(split, []).append(value)
    labels = {
        "lstm forward": "LSTM LM alone, 2 × 256",
        "bilm forward": "BiLM, forward direction",
        "bilm backward": "BiLM, backward direction",
        "bilm gap": "backward / forward − 1",
    }
    lines = ["| model | seeds | valid ppl | test ppl |", "|---|---|---|---|"]
    for key, label in labels.items():
        if key in ppl:
            percent = key.endswith("gap")
            cells = [sweeps.format_cell(ppl[key][split], 2 if percent else 3, percent) for split in ("valid", "test")]
            lines.append(f"| {label} | {len(ppl[key]['valid'])} | {' | '.join(cells)} |")
    return sweeps.table_text(lines, missing), run_dirs, ppl


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sweeps.add_grid_arguments(parser, "shakespeare_bilm", VARIANTS, "train.seed values")
    parser.add_argument("--set", nargs="*", default=[], dest="sets", help="config overrides KEY=VALUE for every run")
    parser.add_argument("--report", action="store_true", help="print the table of finished runs, train nothing")
    sweeps.add_results_argument(parser)
    args = parser.parse_args(argv)
    seeds, variants = sweeps.parse_seeds(args.seeds), sweeps.parse_names(args.variants, VARIANTS, "--variants")
    if not args.report:
        for variant in variants:
            for seed in seeds:
                cfg = cell_config(variant, seed, args.sets)
                sweeps.trained_summary(cfg, cell_dir(args.workdir_root, variant, seed), f"{variant} seed {seed}")
    text, run_dirs, ppl = report(args.workdir_root, seeds, args.sets)
    results = sweeps.results_dir(args.results_dir, args.workdir_root)
    sweeps.publish("shakespeare_bilm", text, args.workdir_root, run_dirs, ppl, results)


if __name__ == "__main__":
    main()
