"""Experiment trackers: where a run's metrics go besides its own `metrics.jsonl` (train.loggers).

* `tensorboard` (the default): event files under the run's `tensorboard/`.
* `wandb` (the extra `seqjax[wandb]`): a Weights & Biases run in project train.wandb_project,
  holding the run's config, every logged metric at its step, the summary's numbers, the
  generated samples as a table and the curves of `seqjax plot` as an image (its `metrics.png`). Its id is kept in
  the run directory (`wandb_id`), so a resumed run goes on in the same W&B run. W&B's own
  settings apply (`WANDB_MODE=offline` logs without a network, to sync later).

A tracker receives what `logging.RunLogger` writes: `scalars(step, split, metrics)`,
`summary(values)` at the end, `close()`.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from tensorboardX import SummaryWriter

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.training.core.curves import plot_runs
from seqjax.training.core.run_dir import RunDir

TRACKERS = ("tensorboard", "wandb")
WANDB_ID = "wandb_id"  # the run directory's file holding its W&B run id


class Tracker(Protocol):
    def scalars(self, step: int, split: str, metrics: Mapping[str, float]) -> None: ...

    def summary(self, values: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def validate_trackers(loggers: tuple[str, ...]) -> None:
    """Raises ValueError for a train.loggers entry that is no tracker, or `wandb` without its package."""
    if isinstance(loggers, str) or not all(isinstance(name, str) for name in loggers):
        raise ValueError(f"train.loggers must be a list of tracker names, got {loggers!r}")
    unknown = [name for name in loggers if name not in TRACKERS]
    if unknown:
        raise ValueError(f"train.loggers entries must be among {', '.join(TRACKERS)}, got {unknown[0]!r}")
    if "wandb" in loggers and importlib.util.find_spec("wandb") is None:
        raise ValueError("train.loggers includes wandb, which is not installed: pip install 'seqjax[wandb]'")


class TensorBoard:
    """One TensorBoard scalar per metric and step, `split/name`."""

    def __init__(self, run: RunDir) -> None:
        self.writer = SummaryWriter(run.file(RunDir.TENSORBOARD))

    def scalars(self, step: int, split: str, metrics: Mapping[str, float]) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(f"{split}/{name}", float(value), step)

    def summary(self, values: Mapping[str, Any]) -> None:
        del values  # the final evaluations were logged as scalars

    def close(self) -> None:
        self.writer.close()


def _numbers(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """The numbers of a nested summary, by their `a/b` paths."""
    for key, value in values.items():
        if isinstance(value, Mapping):
            yield from _numbers(value, f"{prefix}{key}/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield f"{prefix}{key}", float(value)


def _sample_rows(report: Any) -> list[list[str]]:
    """A summary's generated samples (`samples` of the generation report: a language model's
    texts, or a translation's source, output and reference) as rows (input, output, reference)."""
    samples = report.get("samples", []) if isinstance(report, Mapping) else []
    rows = []
    for sample in samples:
        if isinstance(sample, str):
            rows.append(["", sample, ""])
        elif isinstance(sample, Mapping):
            rows.append([str(sample.get(key, "")) for key in ("source", "output", "reference")])
    return rows


class WandB:
    """The run's W&B run: created on the first start (its id written to the run directory), the
    same one resumed after."""

    def __init__(self, run: RunDir, cfg: Config) -> None:
        import wandb

        self.wandb = wandb
        self.run_dir = run
        id_file = run.file(WANDB_ID)
        if os.path.isfile(id_file):
            with open(id_file) as f:
                run_id = f.read().strip()
        else:
            run_id = uuid.uuid4().hex[:12]
            with open(id_file, "w") as f:
                f.write(run_id + "\n")
        self.run = wandb.init(
            project=cfg.train.wandb_project,
            name=os.path.basename(os.path.abspath(run.path)),
            id=run_id,
            resume="allow",
            dir=run.path,
            config=config_lib.to_dict(cfg),
        )

    def scalars(self, step: int, split: str, metrics: Mapping[str, float]) -> None:
        self.run.log({f"{split}/{name}": float(value) for name, value in metrics.items()}, step=step)

    def summary(self, values: Mapping[str, Any]) -> None:
        self.run.summary.update(dict(_numbers({k: v for k, v in values.items() if k != "samples"})))
        rows = _sample_rows(values.get("samples"))
        if rows:
            self.run.log({"samples": self.wandb.Table(columns=["input", "output", "reference"], data=rows)})
        self.run.log({"curves": self.wandb.Image(plot_runs([self.run_dir.path]))})

    def close(self) -> None:
        self.run.finish()


def open_trackers(cfg: Config, run: RunDir) -> list[Tracker]:
    """The trackers train.loggers names, in its order, for the run directory `run`."""
    validate_trackers(cfg.train.loggers)
    return [TensorBoard(run) if name == "tensorboard" else WandB(run, cfg) for name in cfg.train.loggers]
