"""`seqjax plot`: a PNG of the training curves of one or several runs, from metrics.jsonl."""

import json

import pytest

from seqjax.cli import main
from seqjax.training.plot import read_curves, run_labels

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fake_run(directory, steps, scale=1.0, perplexity_key="token_perplexity"):
    """A run directory whose metrics.jsonl holds train records every step and a valid record
    every 10 steps, as `seqjax train` writes them."""
    directory.mkdir(parents=True)
    with open(directory / "metrics.jsonl", "w") as f:
        for step in range(1, steps + 1):
            f.write(
                json.dumps(
                    {
                        "step": step,
                        "split": "train",
                        "loss": scale * 4 / step**0.5,
                        "tokens": 128.0,
                        "tokens_per_sec": 1000.0 + step,
                    }
                )
                + "\n"
            )
            if step % 10 == 0:
                f.write(
                    json.dumps(
                        {"step": step, "split": "valid", "nll": 1.0, perplexity_key: scale * 50 / step, "tokens": 500.0}
                    )
                    + "\n"
                )
    return directory


def test_plot_writes_a_png_of_several_runs(tmp_path, capsys):
    runs = [fake_run(tmp_path / "a", 60), fake_run(tmp_path / "b", 40, scale=1.5)]
    output = tmp_path / "curves.png"
    assert main(["plot", "--workdir", *map(str, runs), "--output", str(output)]) == 0
    assert str(output) in capsys.readouterr().out
    data = output.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 20_000


def test_plot_defaults_to_metrics_png_in_the_first_run(tmp_path):
    run = fake_run(tmp_path / "run", 30)
    assert main(["plot", "--workdir", str(run)]) == 0
    assert (run / "metrics.png").read_bytes()[:8] == PNG_SIGNATURE


def test_a_step_logged_twice_keeps_its_later_value_and_old_perplexity_names_are_read(tmp_path):
    run = fake_run(tmp_path / "run", 20, perplexity_key="perplexity")
    with open(run / "metrics.jsonl", "a") as f:  # a resume re-ran step 20
        f.write(json.dumps({"step": 20, "split": "train", "loss": 0.5, "tokens": 128.0, "tokens_per_sec": 9.0}) + "\n")
    curves = read_curves(str(run))
    steps, losses = curves["train", "loss"]
    assert steps == list(range(1, 21)) and losses[-1] == 0.5
    assert curves["valid", "token_perplexity"] == ([10, 20], [5.0, 2.5])


def test_runs_are_labelled_by_directory_or_by_path_when_names_clash():
    assert run_labels(["x/run1", "x/run2/"]) == ["run1", "run2"]
    assert run_labels(["x/run", "y/run"]) == ["x/run", "y/run"]


def test_a_directory_without_metrics_is_a_user_error(tmp_path, capsys):
    assert main(["plot", "--workdir", str(tmp_path)]) == 2
    assert "metrics.jsonl" in capsys.readouterr().err


@pytest.mark.parametrize("steps", [1, 5])
def test_a_run_with_a_few_points_still_plots(tmp_path, steps):
    run = fake_run(tmp_path / "run", steps)
    assert main(["plot", "--workdir", str(run)]) == 0
