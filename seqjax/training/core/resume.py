"""Whether a run directory with checkpoints may go on under a config: the resume check that
`seqjax train` makes before it touches anything, and `seqjax eval` before it restores."""

from __future__ import annotations

import os
from typing import Any

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import EVALUATION_CHANGES, SCHEDULE_KEYS, Checkpointer, config_differences


def open_run(
    cfg: Config, workdir: str, checkpointer: Checkpointer, *, extend_schedule: bool = False, evaluating: bool = False
) -> tuple[int | None, Any, list[str]]:
    """Checks that a run with checkpoints in `workdir` may go on under `cfg`: same config but
    for `RESUMABLE_CHANGES` (and `EVALUATION_CHANGES` when only `evaluating`), same vocabulary,
    and the same learning-rate schedule (`SCHEDULE_KEYS`) unless `extend_schedule`.

    Returns the step to resume from, the run's saved tokenizers (None, None: a fresh run) and
    the schedule keys that changed ("key: checkpoint has A, now B").
    """
    latest = checkpointer.latest_step()
    if latest is None:
        return None, None, []
    meta = checkpointer.restore_meta(latest)
    current = config_lib.to_dict(cfg)
    diffs = config_differences(meta["config"], current)
    diffs = [d for d in diffs if not (evaluating and d.split(":")[0] in EVALUATION_CHANGES)]
    if diffs:
        raise ValueError(f"config does not match the checkpoint in {workdir}: {'; '.join(diffs)}")
    schedule = config_differences(meta["config"], current, keys=SCHEDULE_KEYS)
    if schedule and not extend_schedule:
        raise ValueError(
            f"the learning-rate schedule differs from the one the checkpoint at step {latest} in {workdir} was "
            f"trained under: {'; '.join(schedule)}. Run with the checkpoint's values, or pass --extend-schedule "
            "to go on from that step under the new schedule"
        )
    run = RunDir(workdir)
    if not os.path.isdir(run.tokenizer_dir) or run.tokenizer_fingerprint() != meta["tokenizer"]:
        raise ValueError(f"the vocabulary in {run.tokenizer_dir} does not match the checkpoint at step {latest}")
    return latest, run.tokenizers(), schedule
