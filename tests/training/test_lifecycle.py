"""A run's life: stopped by SIGTERM or SIGINT and resumed to the same result, resumes that
would change the learning-rate schedule, the data counts a run records, and the metric names."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from helpers import child_environment
from tiny_runs import tiny, tiny_config

from seqjax.cli import main
from seqjax.data import load_data
from seqjax.training.core.signals import SYNC_EVERY, StopRequest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 300
# Every step logged, so that the losses of two runs compare step by step; no checkpoint but
# the last, so that the one a signal writes is the only other.
LONG = tiny(
    f"train.steps={STEPS}",
    "train.log_every=1",
    "train.checkpoint_every=0",
    "train.eval_batches=1",
)


def launch(workdir, log, *overrides, devices=1):
    """`seqjax train` of LONG in a child process on CPU devices, its output in log.out/err."""
    env = child_environment(devices)
    with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "seqjax.cli", "train", "--workdir", str(workdir), "--set", *LONG, *overrides],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=err,
        )


def train_records(workdir):
    path = workdir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r["split"] == "train"]


def signal_after_a_few_steps(process, workdir, signum, watched=None):
    """Sends `signum` to `process` once `watched` (default: the process) has logged step 3."""
    deadline = time.monotonic() + 300
    while not any(r["step"] >= 3 for r in train_records(workdir)):
        running = (watched or process).poll() is None
        assert running and time.monotonic() < deadline, "the run ended before it was signalled"
        time.sleep(0.05)
    process.send_signal(signum)
    return (watched or process).wait(timeout=180)


def assert_stopped_with_a_checkpoint(code, signum, workdir, log):
    out, err = open(f"{log}.out").read(), open(f"{log}.err").read()
    assert code == 128 + signum, err
    assert "Traceback" not in err
    (step,) = map(int, re.findall(r"stopped at step (\d+), checkpoint written; run the same command to resume", out))
    assert 3 <= step < STEPS
    assert sorted(os.listdir(workdir / "checkpoints")) == [str(step)]
    assert train_records(workdir)[-1]["step"] == step
    return step


@pytest.mark.slow
def test_sigterm_stops_at_a_step_with_a_checkpoint_and_the_resumed_run_ends_as_an_uninterrupted_one(tmp_path):
    stopped = launch(tmp_path / "run", tmp_path / "first")
    code = signal_after_a_few_steps(stopped, tmp_path / "run", signal.SIGTERM)
    step = assert_stopped_with_a_checkpoint(code, signal.SIGTERM, tmp_path / "run", tmp_path / "first")
    # Both find the programs the first run compiled in the compilation cache.
    reference = launch(tmp_path / "reference", tmp_path / "reference")
    resumed = launch(tmp_path / "run", tmp_path / "again")
    assert resumed.wait(timeout=180) == 0 and reference.wait(timeout=180) == 0
    assert f"resuming {tmp_path / 'run'} at step {step}" in open(tmp_path / "again.out").read()
    last = train_records(tmp_path / "run")[-1]
    uninterrupted = train_records(tmp_path / "reference")[-1]
    assert (last["step"], last["loss"]) == (uninterrupted["step"], uninterrupted["loss"]) and last["step"] == STEPS


@pytest.mark.slow
def test_ctrl_c_stops_at_a_step_with_a_checkpoint_and_exit_status_130(tmp_path):
    process = launch(tmp_path / "run", tmp_path / "log")
    code = signal_after_a_few_steps(process, tmp_path / "run", signal.SIGINT)
    assert_stopped_with_a_checkpoint(code, signal.SIGINT, tmp_path / "run", tmp_path / "log")


@pytest.mark.slow
def test_a_sigterm_to_one_process_of_two_stops_both_after_the_same_step(tmp_path):
    """Process 1 alone is signalled; both stop at the next step where they compare requests
    (a logged step, every 7th, or every SYNC_EVERY-th) and write one checkpoint together."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shared = [
        "train.log_every=7",
        "train.mesh=data:8",
        "train.distributed=true",
        f"train.coordinator=127.0.0.1:{port}",
        "train.num_processes=2",
        "train.heartbeat_timeout=30",
    ]
    logs = [tmp_path / f"process{i}" for i in range(2)]
    processes = [launch(tmp_path / "run", logs[i], *shared, f"train.process_id={i}", devices=4) for i in range(2)]
    try:
        first = signal_after_a_few_steps(processes[1], tmp_path / "run", signal.SIGTERM, watched=processes[0])
        codes = [first, processes[1].wait(timeout=60)]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [143, 143], open(f"{logs[0]}.err").read()[-3000:] + open(f"{logs[1]}.err").read()[-3000:]
    step = assert_stopped_with_a_checkpoint(143, signal.SIGTERM, tmp_path / "run", logs[0])
    assert step % 7 == 0 or step % SYNC_EVERY == 0


def test_the_first_signal_is_recorded_and_a_second_takes_the_handler_from_before():
    def aborted(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, aborted)
    try:
        with StopRequest() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)  # the handler runs between two bytecodes of this thread
            assert stop.signum == signal.SIGTERM
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is aborted
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="module")
def quiet_run(tmp_path_factory):
    """The run directory of a tiny run of 4 steps trained once for the tests below
    that resume it, refuse to, or evaluate it; a test that changes it works on a copy."""
    workdir = tmp_path_factory.mktemp("quiet")
    assert main(["train", "--workdir", str(workdir), "--set", *tiny()]) == 0
    return workdir


def test_a_resume_that_changes_the_schedule_is_refused_naming_both_values(quiet_run, capsys):
    for change, message in [
        ("train.steps=6", "train.steps: checkpoint has 4, now 6"),
        ("optim.learning_rate=0.001", "optim.learning_rate: checkpoint has 0.003, now 0.001"),
    ]:
        capsys.readouterr()
        assert main(["train", "--workdir", str(quiet_run), "--set", *tiny(change)]) == 2
        err = capsys.readouterr().err
        assert message in err and "--extend-schedule" in err and "Traceback" not in err
    assert [r["step"] for r in train_records(quiet_run)] == [2, 4]


def test_extend_schedule_goes_on_under_the_new_schedule_and_says_so(quiet_run, tmp_path, capsys):
    run = shutil.copytree(quiet_run, tmp_path / "run")
    assert main(["train", "--extend-schedule", "--workdir", str(run), "--set", *tiny("train.steps=6")]) == 0
    out = capsys.readouterr().out
    assert "--extend-schedule: going on from step 4 under the new learning-rate schedule" in out
    assert "train.steps: checkpoint has 4, now 6" in out
    assert [r["step"] for r in train_records(run)] == [2, 4, 6]
    assert json.loads((run / "config.json").read_text())["train"]["steps"] == 6
    # The run is now one of 6 steps: the same command resumes (nothing left to do) without the flag.
    assert main(["train", "--workdir", str(run), "--set", *tiny("train.steps=6")]) == 0


def test_training_pairs_dropped_for_length_are_printed_per_split_and_saved(tmp_path, capsys):
    seq2seq = (
        "data.task=reverse",
        "model.kind=transformer_seq2seq",
        "data.buckets=24",
        "data.max_pair_len=8",
        "train.steps=2",
    )
    expected = load_data(tiny_config(*seq2seq).data)
    assert expected.dropped["train"] > 0
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny(*seq2seq)]) == 0
    out = capsys.readouterr().out
    kept = len(expected.splits["train"][0])
    assert (
        f"train {kept:,} pairs ({expected.dropped['train']:,} dropped: longer than data.max_pair_len=8 tokens)" in out
    )
    record = json.loads((tmp_path / "data.json").read_text())
    assert record == {
        split: {"pairs": len(src), "dropped": expected.dropped[split]} for split, (src, _) in expected.splits.items()
    }


def test_metrics_are_named_per_token_and_per_word_and_lm_eval_prints_one_summary_line(quiet_run, capsys):
    summary = json.loads((quiet_run / "summary.json").read_text())
    assert set(summary["test"]) == {"nll", "token_perplexity", "tokens", "word_perplexity"}
    capsys.readouterr()
    assert main(["eval", "--workdir", str(quiet_run), "--split", "test"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("test: per-token perplexity ") and "per-word perplexity" in first
    assert json.loads(out[out.index("{") :])["test"] == pytest.approx(summary["test"])
