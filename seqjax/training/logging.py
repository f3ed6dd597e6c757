"""Run records: metrics.jsonl, TensorBoard event files, summary.json."""

from __future__ import annotations

import json
import os
from typing import Any

from tensorboardX import SummaryWriter

from seqjax.training.state import dump_json


class RunLogger:
    """Appends one JSON line and one TensorBoard scalar per metric and step."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.jsonl = open(os.path.join(workdir, "metrics.jsonl"), "a")
        self.writer = SummaryWriter(os.path.join(workdir, "tensorboard"))

    def write(self, step: int, split: str, metrics: dict[str, Any]) -> None:
        record = {"step": step, "split": split, **{k: float(v) for k, v in metrics.items()}}
        self.jsonl.write(json.dumps(record) + "\n")
        self.jsonl.flush()
        for name, value in metrics.items():
            self.writer.add_scalar(f"{split}/{name}", float(value), step)

    def summary(self, values: dict[str, Any]) -> None:
        dump_json(os.path.join(self.workdir, "summary.json"), values)

    def close(self) -> None:
        self.jsonl.close()
        self.writer.close()
