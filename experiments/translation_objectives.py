"""Exposure bias and sequence-level training on gettext en→de.

    python experiments/translation_objectives.py [--workdir runs/translation_objectives]
        [--models transformer,attention] [--objectives teacher_forcing,...] [--seeds 0,1]
        [--steps 100]

Every objective fine-tunes the same teacher-forced checkpoint of each model (runs/gettext_transformer
and runs/gettext_attention_additive, from experiments/gettext_transformer.py) for --steps steps at
a constant learning rate of 1e-4, once per train.seed (data order, dropout and sampling keys);
continuing with teacher forcing is the control. Each fine-tuned model then decodes the test split
greedily and with beams 2 and 3, and the script prints markdown tables of test BLEU and ROUGE-L
(mean ± half the range over seeds) next to the checkpoint it started from and copy-the-source;
they are also written to WORKDIR/table.md, and with the runs' records (the checkpoints' too) to
experiments/results/translation_objectives.json and .md. Finished runs and decodes are read, not redone, so a
stopped sweep continues where it stopped. Each run starts from its checkpoint's saved config,
whose corpus paths are relative: they resolve under its data.root or, when that is empty,
under `$SEQJAX_DATA` (experiments/README.md), so set it as for the checkpoint's training.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps  # noqa: E402

from seqjax.config import Config, ObjectiveConfig  # noqa: E402
from seqjax.objectives import Mixer, Reinforce, ScheduledSampling  # noqa: E402
from seqjax.training.core.run_dir import RunDir  # noqa: E402

CHECKPOINTS = {
    "transformer": os.path.join("runs", "gettext_transformer"),
    "attention": os.path.join("runs", "gettext_attention_additive"),
}
OBJECTIVES = (
    "teacher_forcing",
    "scheduled_sampling",
    "random_replacement",
    "gradient_penalty",
    "self_critical",
    "mixer",
    "minimum_risk",
)
BEAMS = (1, 2, 3)
DEFAULT_STEPS = 100  # Transformer, one core: teacher forcing 2.1-2.6 min a run, self-critical 10-11 min (measured)
# (table, report key, digits, beam widths): perplexity does not depend on the decoding
MEASURES = (("BLEU", "bleu", 2, BEAMS), ("ROUGE-L", "rougeL", 3, BEAMS), ("perplexity", "perplexity", 1, (1,)))


def objective_config(name: str, steps: int) -> ObjectiveConfig:
    """The objective `name`, its schedules scaled to a fine-tuning run of `steps` steps."""
    if name not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {name!r}")
    if name == "scheduled_sampling":  # ε from 1 (gold) down to 0.5 at the end, argmax feed as at test time
        sampling = ScheduledSampling(schedule="linear", k=1.0, c=0.5 / steps, eps_min=0.5, feed="argmax")
        return ObjectiveConfig(kind=name, groups=(sampling,))
    if name == "self_critical":
        return ObjectiveConfig(kind="reinforce", groups=(Reinforce(baseline="self_critical"),))
    if name == "mixer":  # REINFORCE on the last Δ = 4, 8, 12, 16 tokens, one quarter of the run each
        mixer = Mixer(baseline="self_critical", delta_start=4, delta_growth=4, delta_every=max(steps // 4, 1))
        return ObjectiveConfig(kind="mixer", groups=(mixer,))
    return ObjectiveConfig(kind=name)  # teacher forcing, random replacement, gradient penalty, MRT: defaults


def run_config(base: Config, checkpoint: str, name: str, seed: int, steps: int) -> Config:
    """Fine-tuning of the run in `checkpoint` (whose config is `base`) with objective `name`."""
    return dataclasses.replace(
        base,
        objective=objective_config(name, steps),
        optim=dataclasses.replace(base.optim, learning_rate=1e-4, schedule="constant", warmup_steps=20),
        train=dataclasses.replace(
            base.train,
            steps=steps,
            seed=seed,
            init_from=checkpoint,
            eval_every=0,
            checkpoint_every=steps,
            num_printed_samples=0,
        ),
    )


def decoded(run_dir: str, beams: tuple[int, ...]) -> dict[str, dict]:
    """Test BLEU and ROUGE-L of the run in `run_dir` per beam width, cached in its decoding.json."""
    from seqjax.training.features.generation import DecodeOptions, translate
    from seqjax.training.saved.run import Run

    path = os.path.join(run_dir, "decoding.json")
    reports = {}
    if os.path.isfile(path):
        with open(path) as f:
            reports = json.load(f)
    missing = [b for b in beams if str(b) not in reports]
    if missing:
        restored = Run.open(run_dir, ["train.num_printed_samples=0"]).restore()
        exp, state = restored.exp, restored.state
        for beam in missing:
            start = time.perf_counter()
            report = translate(exp, state.params, "test", options=DecodeOptions(beam=beam), echo=lambda _: None)
            reports[str(beam)] = {key: report[key] for key in ("bleu", "rougeL", "copy_bleu", "copy_rougeL")}
            reports[str(beam)]["seconds"] = time.perf_counter() - start
            print(f"   {run_dir} beam {beam}: BLEU {report['bleu']:.2f} ROUGE-L {report['rougeL']:.3f}", flush=True)
            with open(path, "w") as f:
                json.dump(reports, f, indent=2)
    return reports


def fine_tuning_dir(workdir: str, model: str, name: str, seed: int) -> str:
    return os.path.join(workdir, f"{model}-{name}-seed{seed}")


def sweep(models: list[str], names: list[str], seeds: list[int], steps: int, workdir: str) -> dict:
    """Fine-tunes (or reads) and decodes every run; returns {model: {row: [decoding per seed]}}."""
    results: dict[str, dict[str, list[dict]]] = {}
    for model in models:
        checkpoint = CHECKPOINTS[model]
        base = RunDir(checkpoint).config
        rows = results.setdefault(model, {})
        rows["checkpoint (no fine-tuning)"] = [with_perplexity(decoded(checkpoint, BEAMS), checkpoint)]
        for seed in seeds:
            for name in names:
                directory = fine_tuning_dir(workdir, model, name, seed)
                cfg = run_config(base, checkpoint, name, seed, steps)
                sweeps.trained_summary(cfg, directory, f"{model} {name} seed {seed}")
                rows.setdefault(name, []).append(with_perplexity(decoded(directory, BEAMS), directory))
    return results


def with_perplexity(report: dict[str, dict], run_dir: str) -> dict[str, dict]:
    """`report` with the run's test perplexity (from its summary.json) beside each beam's scores."""
    with open(os.path.join(run_dir, "summary.json")) as f:
        test = json.load(f)["test"]
    perplexity = test.get("token_perplexity", test.get("perplexity"))  # "perplexity" before the key's rename
    return {beam: {**scores, "perplexity": perplexity} for beam, scores in report.items()}


def results_table(results: dict, measure: str, key: str, digits: int, beams: tuple[int, ...] = BEAMS) -> str:
    """Markdown: one row per objective, one column per model × beam width."""
    models = list(results)
    columns = [f"{m} beam {b}" if len(beams) > 1 else m for m in models for b in beams]
    lines = [
        f"Test {measure}",
        "",
        "| " + " | ".join(["objective", *columns, "seeds"]) + " |",
        "|" + "---|" * (len(columns) + 2),
    ]
    first = next(iter(results[models[0]].values()))[0]["1"]
    if "copy_" + key in first:
        copy = f"{first['copy_' + key]:.{digits}f}"
        lines.append("| copy the source | " + " | ".join([copy] * len(columns)) + " | - |")
    names = list(dict.fromkeys(name for m in models for name in results[m]))
    for name in names:
        cells, seeds = [], set()
        for m in models:
            runs = results[m].get(name, [])
            seeds.add(len(runs))
            cells += [sweeps.format_cell([run[str(b)][key] for run in runs], digits) if runs else "-" for b in beams]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'/'.join(map(str, sorted(seeds)))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.path.join("runs", "translation_objectives"))
    parser.add_argument("--models", default=",".join(CHECKPOINTS))
    parser.add_argument("--objectives", default=",".join(OBJECTIVES))
    parser.add_argument("--seeds", default="0,1", help="train.seed values of the fine-tuning, comma-separated")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="fine-tuning steps per run")
    sweeps.add_results_argument(parser)
    args = parser.parse_args(argv)
    models = sweeps.parse_names(args.models, CHECKPOINTS, "--models")
    names = sweeps.parse_names(args.objectives, OBJECTIVES, "--objectives")
    if args.steps < 4:
        raise ValueError(f"--steps must be >= 4, got {args.steps}")
    seeds = sweeps.parse_seeds(args.seeds)
    results = sweep(models, names, seeds, args.steps, args.workdir)
    text = "\n\n".join(results_table(results, *measure) for measure in MEASURES) + "\n"
    tuned = [fine_tuning_dir(args.workdir, m, n, s) for m in models for s in seeds for n in names]
    runs = [CHECKPOINTS[m] for m in models] + tuned
    sweeps.publish(
        "translation_objectives", text, args.workdir, runs, results, sweeps.results_dir(args.results_dir, args.workdir)
    )


if __name__ == "__main__":
    main()
