"""A head kind written outside seqjax (here, in this test module: its Linen head, its options and
its builder) and registered by one `HEADS.register` call is trained by `seqjax train`, saved in the
run's config.json with its options and listed by `seqjax config`; `HEADS.remove` takes it out."""

import dataclasses
import json
import math

import numpy as np
import pytest
from jax import Array
from tiny_runs import tiny

from seqjax.checks import number
from seqjax.cli import main
from seqjax.config import HEADS, HeadConfig, Options, option
from seqjax.heads.base import WordScores

pytestmark = pytest.mark.slow  # a training run through the command line


@dataclasses.dataclass(frozen=True)
class ScaledOptions(Options):
    """The scaled softmax's factor on the hidden state."""

    scale: float = option(1.0, "factor on the hidden state before the output layer", check=number(0.0))


class ScaledSoftmax(WordScores):
    """The full softmax over (scale · h)·w + b."""

    scale: float = 1.0

    def log_probs(self, hidden: Array, embedding: Array | None = None) -> Array:
        return super().log_probs(hidden * self.scale, embedding)

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        return super().target_log_probs(hidden * self.scale, targets, embedding)


BUILT: list[ScaledSoftmax] = []  # what the builder made: the head the run trained


def build_scaled(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> ScaledSoftmax:
    scale = cfg.options_of(ScaledOptions).scale
    head = ScaledSoftmax(vocab_size, tied=cfg.tied, learn_bias=cfg.learn_bias, scale=scale)
    BUILT.append(head)
    return head


@pytest.fixture
def scaled_kind():
    """`head.kind=scaled` registered by one call; taken out after the test if it has not been."""
    HEADS.register("scaled", build_scaled, options=ScaledOptions, families=("tied", "word_bias"))
    yield
    if "scaled" in HEADS:
        HEADS.remove("scaled")
    BUILT.clear()


def test_a_head_kind_registered_here_is_trained_saved_and_listed_until_removed(scaled_kind, tmp_path, capsys):
    settings = tiny("head.kind=scaled", "head.scaled.scale=0.0", "train.log_every=1")
    assert main(["train", "--workdir", str(tmp_path), "--set", *settings]) == 0
    (head,) = BUILT
    assert head.scale == 0.0
    # Scale 0 scores every word by its bias, all 0 at the start: the first loss is log V.
    first = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert first["step"] == 1 and first["loss"] == pytest.approx(math.log(head.vocab_size), rel=1e-6)

    saved = json.loads((tmp_path / "config.json").read_text())["head"]
    assert saved["kind"] == "scaled" and saved["scaled"] == {"scale": 0.0}

    config_json = str(tmp_path / "config.json")
    capsys.readouterr()
    assert main(["config", "--config", config_json]) == 0
    out = capsys.readouterr().out
    assert 'kind = "scaled"' in out
    assert (
        "[head.scaled]\nscale = 0.0  # float, default 1.0: factor on the hidden state before the output layer\n" in out
    )

    HEADS.remove("scaled")
    assert main(["config", "--config", config_json]) == 2
    assert "unknown config key 'head.scaled' in saved config" in capsys.readouterr().err
