"""`seqjax plot`: a PNG of the training curves of one or several runs, from metrics.jsonl."""

import json
import struct

import numpy as np
import pytest

from seqjax.cli import main
from seqjax.training.core.curves import draw_runs, read_curves, run_labels

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
    assert data[:8] == PNG_SIGNATURE
    assert struct.unpack(">II", data[16:24]) == (1716, 462)  # width, height: three 5.2 x 4.2 inch panels at 110 dpi


def test_the_figure_draws_each_runs_metrics_in_titled_panels_under_a_legend_of_the_runs(tmp_path):
    runs = [fake_run(tmp_path / "a", 60), fake_run(tmp_path / "b", 40, scale=1.5)]
    figure = draw_runs([str(r) for r in runs])
    titles = ["training loss", "validation perplexity", "throughput"]
    assert [ax.get_title() for ax in figure.axes] == titles
    assert [ax.get_ylabel() for ax in figure.axes] == ["loss (nats/token)", "per-token perplexity", "target tokens / s"]
    assert [ax.get_yscale() for ax in figure.axes] == ["linear", "log", "linear"]  # perplexity spans 0.83 to 7.5
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["a", "b"]
    for index, (label, scale, steps) in enumerate([("a", 1.0, 60), ("b", 1.5, 40)]):
        train, valid = np.arange(1, steps + 1), np.arange(10, steps + 1, 10)
        expected = [(train, scale * 4 / train**0.5), (valid, scale * 50 / valid), (train, 1000.0 + train)]
        lines = [ax.get_lines()[index] for ax in figure.axes]
        assert {line.get_label() for line in lines} == {label}
        assert len({line.get_color() for line in lines}) == 1  # one colour per run across the panels
        for line, (x, y) in zip(lines, expected):
            np.testing.assert_array_equal(line.get_xdata(), x)
            np.testing.assert_allclose(line.get_ydata(), y, rtol=1e-12)
    assert figure.axes[0].get_lines()[0].get_color() != figure.axes[0].get_lines()[1].get_color()


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
