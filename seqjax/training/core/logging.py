"""Run records: metrics.jsonl, TensorBoard event files, summary.json, data.json."""

from __future__ import annotations

import json
from typing import Any

from tensorboardX import SummaryWriter

from seqjax.config import DataConfig
from seqjax.data import LMData, ParallelData
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import dump_json


class RunLogger:
    """Appends one JSON line and one TensorBoard scalar per metric and step."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.jsonl = open(RunDir(workdir).file(RunDir.METRICS), "a")
        self.writer = SummaryWriter(RunDir(workdir).file(RunDir.TENSORBOARD))

    def write(self, step: int, split: str, metrics: dict[str, Any]) -> None:
        record = {"step": step, "split": split, **{k: float(v) for k, v in metrics.items()}}
        self.jsonl.write(json.dumps(record) + "\n")
        self.jsonl.flush()
        for name, value in metrics.items():
            self.writer.add_scalar(f"{split}/{name}", float(value), step)

    def summary(self, values: dict[str, Any]) -> None:
        dump_json(RunDir(self.workdir).file(RunDir.SUMMARY), values)

    def close(self) -> None:
        self.jsonl.close()
        self.writer.close()


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
