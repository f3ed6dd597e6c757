"""Orbax checkpoints of the train state plus the metadata that makes a resume exact.

A checkpoint holds the state (parameters, optimizer state, step, PRNG key) and a JSON
record of the data position, the resolved config and the tokenizer fingerprint. Orbax
writes into a temporary folder and renames it, so a crash never leaves a half-written
checkpoint behind; the last `keep` are kept. Arrays are stored as global arrays, each
process writing the shards it holds, and restored onto whatever shardings the target
state carries: a checkpoint moves between meshes, strategies and process counts.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from seqjax.training.state import TrainState

# Keys that may change between a run and its resume without changing what is trained.
RESUMABLE_CHANGES = {
    "train.steps",
    "train.log_every",
    "train.eval_every",
    "train.eval_batches",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.num_printed_samples",
    "train.printed_sample_len",
    "train.mesh",
    # A checkpoint restores onto any mesh, strategy or number of processes.
    "train.sharding",
    "train.step_kind",
    "train.vocab_parallel",
    "train.distributed",
    "train.coordinator",
    "train.num_processes",
    "train.process_id",
    "train.heartbeat_timeout",
}


def fingerprint(directory: str) -> str:
    """sha256 over the files of a saved tokenizer directory, in name order."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        digest.update(name.encode())
        with open(os.path.join(directory, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The `section.key` names whose values differ and may not differ on resume."""
    out = []
    for section, fields in current.items():
        for key, value in fields.items():
            name = f"{section}.{key}"
            old = saved.get(section, {}).get(key)
            if isinstance(value, tuple):
                value = list(value)
            if name not in RESUMABLE_CHANGES and old != value:
                out.append(f"{name}: checkpoint has {old!r}, now {value!r}")
    return out


class Checkpointer:
    def __init__(self, directory: str, keep: int):
        self.manager = ocp.CheckpointManager(
            os.path.abspath(directory),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=True),
        )

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, state: TrainState, meta: dict[str, Any]) -> None:
        step = int(jax.device_get(state.step))
        self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))

    def restore_meta(self, step: int) -> dict[str, Any]:
        return self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]

    def restore(self, step: int, abstract_state: TrainState) -> tuple[TrainState, dict[str, Any]]:
        """Restores onto the shardings carried by `abstract_state` (jax.ShapeDtypeStruct leaves)."""
        restored = self.manager.restore(
            step,
            args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()),
        )
        return restored["state"], restored["meta"]

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()


def dump_json(path: str, value: Any) -> None:
    """Writes JSON atomically (temp file + rename)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2)
    os.replace(tmp, path)
