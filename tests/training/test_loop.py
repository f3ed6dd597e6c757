"""Runs through `seqjax.training.loop.train`: when they evaluate and which checkpoints they
keep, and that a run interrupted after a checkpoint and started again continues as if it
had never stopped, through the loop, through the command line, and onto another mesh."""

import json
import os
import shutil

import jax
import pytest
from tiny_runs import tiny

from seqjax import config as config_lib
from seqjax.cli import main
from seqjax.config import Config
from seqjax.training.core.state import Checkpointer
from seqjax.training.loop import train

STEPS, INTERRUPTED_AT = 8, 4
# Every step logged; dropout on, so a resumed run must also restore the PRNG key.
RUN = tiny(
    f"train.steps={STEPS}",
    "train.log_every=1",
    "train.eval_every=3",
    "train.checkpoint_every=2",
    "train.keep_checkpoints=2",
    "train.eval_batches=2",
    "model.dropout=0.2",
)


class Interrupted(Exception):
    """Stands for the process dying right after a checkpoint was written."""


def interrupt_after_checkpoint(monkeypatch, step):
    save = Checkpointer.save

    def save_then_stop(self, state, meta):
        save(self, state, meta)
        if int(jax.device_get(state.step)) == step:
            raise Interrupted

    monkeypatch.setattr(Checkpointer, "save", save_then_stop)


def records(workdir):
    """(step, split, loss or nll) of every line of the run's metrics.jsonl, in order."""
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["split"], r["loss"] if r["split"] == "train" else r["nll"]) for r in map(json.loads, lines)]


def checkpoint_steps(workdir):
    return sorted(int(name) for name in os.listdir(workdir / "checkpoints") if name.isdigit())


def config(*overrides):
    return config_lib.override(Config(), [*RUN, *overrides])


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The run directory of an uninterrupted run."""
    workdir = tmp_path_factory.mktemp("straight")
    train(config(), str(workdir), echo=lambda _: None)
    return workdir


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """The run directory of the same run stopped right after its checkpoint at INTERRUPTED_AT."""
    workdir = tmp_path_factory.mktemp("interrupted")
    with pytest.MonkeyPatch.context() as monkeypatch:
        interrupt_after_checkpoint(monkeypatch, INTERRUPTED_AT)
        with pytest.raises(Interrupted):
            train(config(), str(workdir), echo=lambda _: None)
    assert [r[0] for r in records(workdir) if r[1] == "train"] == list(range(1, INTERRUPTED_AT + 1))
    return workdir


def resumable_copy(interrupted, tmp_path):
    shutil.copytree(interrupted, tmp_path / "run")
    return tmp_path / "run"


def test_eval_every_evaluates_the_valid_split_at_its_multiples_and_at_the_end(straight):
    assert [r[0] for r in records(straight) if r[1] == "valid"] == [3, 6, STEPS]
    assert [r[0] for r in records(straight) if r[1] == "test"] == [STEPS]


def test_keep_checkpoints_keeps_only_the_newest(straight):
    assert checkpoint_steps(straight) == [6, 8]  # written at 2, 4, 6, 8; train.keep_checkpoints=2


def test_a_run_resumed_through_the_loop_logs_what_the_uninterrupted_run_logs(straight, interrupted, tmp_path):
    workdir = resumable_copy(interrupted, tmp_path)
    train(config(), str(workdir), echo=lambda _: None)
    assert records(workdir) == records(straight)
    assert json.loads((workdir / "summary.json").read_text()) == json.loads((straight / "summary.json").read_text())


def test_a_run_resumed_onto_another_mesh_and_strategy_continues_with_the_same_losses(straight, interrupted, tmp_path):
    workdir = resumable_copy(interrupted, tmp_path)
    train(config("train.mesh=data:4,model:2", "train.sharding=fsdp_tensor"), str(workdir), echo=lambda _: None)
    got, want = records(workdir), records(straight)
    assert [r[:2] for r in got] == [r[:2] for r in want]
    assert [r[2] for r in got] == pytest.approx([r[2] for r in want], rel=1e-5)


@pytest.mark.slow
def test_the_same_command_run_again_after_an_interruption_continues_like_an_uninterrupted_run(
    straight, interrupted, tmp_path, capsys
):
    """`interrupted` is the run `seqjax train --set RUN` stops as: the command trains
    `config()` (RUN over the defaults) with `train`."""
    workdir = resumable_copy(interrupted, tmp_path)
    command = ["train", "--workdir", str(workdir), "--set", *RUN]
    assert main(command) == 0
    assert f"at step {INTERRUPTED_AT}" in capsys.readouterr().out
    assert records(workdir) == records(straight)
