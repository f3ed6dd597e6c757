"""Run records: metrics.jsonl (and the run's trackers), summary.json, data.json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from seqjax.config import DataConfig
from seqjax.data import LMData, ParallelData
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import dump_json
from seqjax.training.core.trackers import Tracker


class RunLogger:
    """Appends one JSON line per step and split to metrics.jsonl and hands the metrics to the
    run's trackers (`trackers.open_trackers`: TensorBoard, W&B); writes summary.json at the end."""

    def __init__(self, workdir: str, trackers: Sequence[Tracker] = ()):
        self.run = RunDir(workdir)
        self.jsonl = open(self.run.file(RunDir.METRICS), "a")
        self.trackers = list(trackers)

    def write(self, step: int, split: str, metrics: dict[str, Any]) -> None:
        values = {k: float(v) for k, v in metrics.items()}
        self.jsonl.write(json.dumps({"step": step, "split": split, **values}) + "\n")
        self.jsonl.flush()
        for tracker in self.trackers:
            tracker.scalars(step, split, values)

    def summary(self, values: dict[str, Any]) -> None:
        dump_json(self.run.file(RunDir.SUMMARY), values)
        for tracker in self.trackers:
            tracker.summary(values)

    def close(self) -> None:
        self.jsonl.close()
        for tracker in self.trackers:
            tracker.close()


def data_record(data: LMData | ParallelData) -> dict[str, dict[str, int]]:
    """What each split holds, as data.json keeps it. LM: `tokens` (the `</s>` ending each line
    included) and `words` (whitespace words + one `</s>` per line, the per-word perplexity's
    denominator). Seq2seq: `pairs` kept and `dropped`, those left out for exceeding
    data.max_pair_len (only training drops any)."""
    if isinstance(data, ParallelData):
        return {split: {"pairs": len(src), "dropped": data.dropped[split]} for split, (src, _) in data.splits.items()}
    return {split: {"tokens": len(stream), "words": data.words[split]} for split, stream in data.splits.items()}


def describe_data(record: dict[str, dict[str, int]], cfg: DataConfig) -> str:
    """`data: train 19,870 pairs (130 dropped: longer than data.max_pair_len=63 tokens), ...`."""
    parts = []
    for split, counts in record.items():
        if "pairs" in counts:
            dropped = counts["dropped"]
            why = f" ({dropped:,} dropped: longer than data.max_pair_len={cfg.max_pair_len} tokens)" if dropped else ""
            parts.append(f"{split} {counts['pairs']:,} pairs{why}")
        else:
            parts.append(f"{split} {counts['tokens']:,} tokens ({counts['words']:,} words)")
    return "data: " + ", ".join(parts)


def save_data_record(workdir: str, record: dict[str, dict[str, int]]) -> None:
    dump_json(RunDir(workdir).file(RunDir.DATA), record)
