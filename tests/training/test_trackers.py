"""Experiment trackers (train.loggers): the names checked on the host; a W&B run, in W&B's
offline mode (no network), holds the run's config, its metrics at their steps, the summary, the
samples and the curves, and a resumed run goes on in the same W&B run."""

import glob
import json
import struct

import pytest
from tiny_runs import SAMPLES, tiny

from seqjax.cli import main
from seqjax.training.core.trackers import WANDB_ID, validate_trackers

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402


def test_the_tracker_names_are_checked():
    validate_trackers(("tensorboard", "wandb"))
    with pytest.raises(ValueError, match="train.loggers entries must be among tensorboard, wandb, got 'mlflow'"):
        validate_trackers(("tensorboard", "mlflow"))


def read_records(path: str) -> list:
    """The records of a W&B run file: a 7-byte header, then blocks of 32 KiB holding records
    of (checksum: 4, length: 2, type: 1 [1 whole, 2 first, 3 middle, 4 last], data)."""
    data = open(path, "rb").read()
    records, pending, offset = [], b"", 7
    while offset + 7 <= len(data):
        room = 32768 - offset % 32768
        if room < 7:  # the block's tail is padding
            offset += room
            continue
        _, length, kind = struct.unpack("<IHB", data[offset : offset + 7])
        if length == 0 and kind == 0:
            break
        pending += data[offset + 7 : offset + 7 + length]
        offset += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def logged(run_dir) -> tuple[list[str], dict, set, dict]:
    """(run ids of each session, config, {(key, step)} of the history, summary) of a W&B offline run."""
    ids, config, history, summary = [], {}, set(), {}
    for path in sorted(glob.glob(str(run_dir / "wandb" / "offline-run-*" / "run-*.wandb"))):
        for record in read_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                ids.append(record.run.run_id)
                config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
            elif kind == "history":
                items = {item.key or "/".join(item.nested_key): item.value_json for item in record.history.item}
                step = json.loads(items.get("_step", "null"))
                history.update((key, step) for key in items if not key.startswith("_"))
            elif kind == "summary":
                summary.update(
                    {item.key or "/".join(item.nested_key): item.value_json for item in record.summary.update}
                )
    return ids, config, history, summary


@pytest.mark.slow  # two short training runs
def test_a_wandb_run_holds_the_run_and_a_resumed_run_goes_on_in_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    loggers = "train.loggers=tensorboard,wandb"
    assert main(["train", "--workdir", str(run), "--set", *tiny(loggers, SAMPLES)]) == 0
    first_id = (run / WANDB_ID).read_text().strip()
    assert (
        main(["train", "--extend-schedule", "--workdir", str(run), "--set", *tiny(loggers, SAMPLES, "train.steps=6")])
        == 0
    )
    ids, config, history, summary = logged(run)
    assert ids == [first_id, first_id]  # the resumed session is the same W&B run
    assert config["model"]["d_model"] == 32 and config["train"]["loggers"] == ["tensorboard", "wandb"]
    assert {("train/loss", 2), ("train/loss", 4), ("train/loss", 6), ("valid/nll", 6)} <= history
    assert {key.split("/")[0] for key, _ in history} >= {"samples", "curves"}
    assert "valid/token_perplexity" in summary and (run / "tensorboard").is_dir()
