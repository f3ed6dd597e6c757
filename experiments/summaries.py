"""An experiment's summary under experiments/results/: the file RESULTS.md quotes.

`write_summary` writes RESULTS_DIR/NAME.json (the command, when it was written, the machine and
versions that wrote it, the code's commit, each run's config keys that differ from the defaults,
its seed, its summary.json and wall time, and the figures of the table) and RESULTS_DIR/NAME.md
(the table the script printed, under a header naming the command and the machine). Every sweep
script writes its summary this way when it reports (`sweeps.publish`); as a script this module
records finished `seqjax train` runs of a single-config experiment:

    seqjax train --workdir runs/default && python experiments/summaries.py default runs/default
    python experiments/summaries.py shakespeare_chars runs/shakespeare_lstm runs/shakespeare_gru ...

A run's wall time is that of its train_seconds.json (written by `sweeps.trained_summary`, with the
machine that trained it) or else the time between its config.json and its summary.json being
written, which includes data preparation, compilation and the final evaluation (and any pause, if
the run was resumed); a counted run (the n-gram baseline writes config.json after counting) adds its
summary's fit_seconds, so its wall time is counting and scoring. Paths in the summary are written
relative to the working directory, and the data root as `$SEQJAX_DATA`, so that the committed file
names nothing outside the repository.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(HERE, "results")


def machine() -> dict[str, Any]:
    """The CPU, cores, memory, load and library versions of this machine and process."""
    import flax
    import jax
    import numpy as np
    import optax

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n")[0]
        fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in first.splitlines() if ":" in line)}
        cpu = f"{fields['model name']}, family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
    except (OSError, KeyError):
        pass
    memory = None
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
        memory = round(kib / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "load_average_1_5_15_min": [round(x, 2) for x in os.getloadavg()],
        "backend": f"{jax.default_backend()} ({jax.devices()[0].device_kind})",
        "python": platform.python_version(),
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "numpy": np.__version__,
    }


def code_version() -> str:
    """`git describe --always --dirty` of the repository ('-dirty': files differed from the commit)."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=HERE, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _median_train_tokens_per_sec(metrics_path: str) -> tuple[float | None, float | None]:
    """(median train tokens/s over the logging intervals, last logged train loss) of a metrics.jsonl."""
    if not os.path.isfile(metrics_path):
        return None, None
    with open(metrics_path) as f:
        train = [r for r in map(json.loads, f) if r.get("split") == "train"]
    speeds = [r["tokens_per_sec"] for r in train if "tokens_per_sec" in r]
    losses = [r["loss"] for r in train if "loss" in r]
    return (statistics.median(speeds) if speeds else None), (losses[-1] if losses else None)


def run_record(run_dir: str, name: str | None = None) -> dict[str, Any]:
    """What the summary keeps of the finished run in `run_dir`: its name, config keys that differ
    from the defaults, seed, summary.json, wall time and where it was trained, median train tokens/s
    and last logged train loss. Raises ValueError when the run has no summary.json (not finished)."""
    from seqjax.config.text import changed
    from seqjax.training.core.run_dir import RunDir

    summary_path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(summary_path):
        raise ValueError(f"{run_dir} holds no finished run (no summary.json)")
    cfg = RunDir(run_dir).config
    with open(summary_path) as f:
        summary = json.load(f)
    record: dict[str, Any] = {
        "run": name or os.path.basename(os.path.normpath(run_dir)),
        "config": changed(cfg),
        "seed": cfg.train.seed,
        "summary": summary,
    }
    timed = os.path.join(run_dir, "train_seconds.json")
    if os.path.isfile(timed):
        with open(timed) as f:
            record["train_seconds"] = json.load(f)
    else:
        started = os.path.getmtime(os.path.join(run_dir, "config.json"))
        record["elapsed_seconds_config_to_summary"] = round(os.path.getmtime(summary_path) - started, 1)
    speed, loss = _median_train_tokens_per_sec(os.path.join(run_dir, "metrics.jsonl"))
    if speed is not None:
        record["median_train_tokens_per_sec"] = round(speed, 1)
        record["last_train_loss"] = loss
    return record


def portable(text: str) -> str:
    """`text` with the working directory's and the data root's absolute paths made relative."""
    data_root = os.environ.get("SEQJAX_DATA", "")
    if data_root:
        text = text.replace(os.path.abspath(data_root), "$SEQJAX_DATA")
    return text.replace(os.getcwd() + os.sep, "").replace(HERE + os.sep, "experiments" + os.sep)


def write_summary(
    name: str,
    table: str,
    runs: list[dict[str, Any]],
    figures: Any,
    results_dir: str = RESULTS_DIR,
    command: list[str] | None = None,
) -> tuple[str, str]:
    """Writes RESULTS_DIR/NAME.json and NAME.md; returns their paths.

    table: the markdown the script printed. runs: `run_record`s of the runs behind it. figures:
    the numbers of the table as the script computed them (JSON-serializable).
    """
    argv = sys.argv if command is None else command
    shown = " ".join(["python", os.path.relpath(argv[0]) if argv and argv[0].endswith(".py") else "", *argv[1:]])
    header: dict[str, Any] = {
        "experiment": name,
        "command": " ".join(shown.split()),
        "written": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "code": code_version(),
        "machine": machine(),
    }
    os.makedirs(results_dir, exist_ok=True)
    json_path, md_path = (os.path.join(results_dir, f"{name}.{ext}") for ext in ("json", "md"))
    document = {**header, "figures": figures, "runs": runs}
    with open(json_path, "w") as f:
        f.write(portable(json.dumps(document, indent=1, ensure_ascii=False, sort_keys=False)) + "\n")
    m = header["machine"]
    about = (
        f"# {name}\n\nWritten by `{header['command']}` at {header['written']} (code {header['code']}) on "
        f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['backend']}, load average "
        f"{', '.join(map(str, m['load_average_1_5_15_min']))}; python {m['python']}, jax {m['jax']}, flax "
        f"{m['flax']}, optax {m['optax']}, numpy {m['numpy']}. Each run's config keys, seed, summary and wall "
        f"time (and the machine that trained it, where recorded) are in `{name}.json`.\n\n"
    )
    with open(md_path, "w") as f:
        f.write(portable(about + table.rstrip() + "\n"))
    return json_path, md_path


def _cell(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def run_figures(record: dict[str, Any]) -> dict[str, Any]:
    """What `seqjax train` measures of any model, from a `run_record`: valid and test perplexity and
    nats per token, per-word test perplexity, the share of sampled sentences a synthetic grammar
    accepts (None where not measured), last train loss, median train tokens/s and wall time."""
    s = record["summary"]
    valid, test = s.get("valid", {}), s.get("test", {})
    return {
        "run": record["run"],
        "seed": record["seed"],
        "parameters": s.get("parameters"),
        "steps": s.get("steps"),
        "valid_perplexity": valid.get("token_perplexity"),
        "valid_nll": valid.get("nll"),
        "test_perplexity": test.get("token_perplexity"),
        "test_nll": test.get("nll"),
        "test_word_perplexity": test.get("word_perplexity"),
        "samples_grammatical": s.get("samples", {}).get("grammatical"),
        "last_train_loss": record.get("last_train_loss"),
        "median_train_tokens_per_sec": record.get("median_train_tokens_per_sec"),
        "wall_seconds": wall_seconds(record),
    }


def wall_seconds(record: dict[str, Any]) -> float | None:
    """The run's train_seconds, else its config-to-summary time plus the counting time of a counted run."""
    if "train_seconds" in record:
        seconds: float = record["train_seconds"]["seconds"]
        return seconds
    elapsed = record.get("elapsed_seconds_config_to_summary")
    return None if elapsed is None else elapsed + record["summary"].get("fit_seconds", 0.0)


def runs_table(figures: list[dict[str, Any]]) -> str:
    """Markdown: one row per run of `run_figures`."""
    lines = [
        "| run | seed | parameters | steps | valid ppl (nats) | test ppl (nats) | test ppl per word "
        "| samples grammatical | last train loss | median train tok/s | wall time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        splits = [
            "-" if f[f"{split}_perplexity"] is None else f"{f[split + '_perplexity']:,.3f} ({f[split + '_nll']:.3f})"
            for split in ("valid", "test")
        ]
        grammatical = "-" if f["samples_grammatical"] is None else f"{f['samples_grammatical']:.1%}"
        lines.append(
            f"| {f['run']} | {f['seed']} | {_cell(f['parameters'], 0)} | {f['steps'] or '-'} | {splits[0]} | "
            f"{splits[1]} | {_cell(f['test_word_perplexity'], 1)} | {grammatical} | {_cell(f['last_train_loss'], 3)} "
            f"| {_cell(f['median_train_tokens_per_sec'], 0)} | {_cell(f['wall_seconds'], 0)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record finished `seqjax train` runs as experiments/results/NAME")
    parser.add_argument("name", help="the summary's name: experiments/results/NAME.json and NAME.md")
    parser.add_argument("run_dirs", nargs="+", help="finished run directories (each holds summary.json)")
    parser.add_argument("--results-dir", default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if not args.name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"NAME must be letters, digits, '_' and '-', got {args.name!r}")
    records = [run_record(run_dir) for run_dir in args.run_dirs]
    figures = [run_figures(record) for record in records]
    table = runs_table(figures)
    print(table)
    for path in write_summary(args.name, table, records, figures, args.results_dir):
        print("wrote", portable(path))


if __name__ == "__main__":
    main()
