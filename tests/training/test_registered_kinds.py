"""A model kind, an objective and an optimizer written outside seqjax (here, in this test module),
each registered by one call, are trained together by `seqjax train`, with their own options from
`--set`, saved in the run's config.json and listed by `seqjax config`. (A head, an attention
kernel and a data format registered the same way are trained in tests/heads/test_registered_kind.py,
tests/models/test_attention_kernels.py and tests/data/test_formats.py.)"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import pytest
from tiny_runs import tiny

from seqjax.checks import integer, number
from seqjax.cli import main
from seqjax.config import MODELS, OBJECTIVES, OPTIMIZERS, Options, option
from seqjax.models.base import TokenModel, dense_axes, token_embedding
from seqjax.objectives.teacher_forcing import TeacherForcing
from seqjax.optimizers.settings import SharedSettings

pytestmark = pytest.mark.slow  # a training run through the command line

USED: dict[str, list[Any]] = {"model": [], "objective": [], "optimizer": []}


@dataclasses.dataclass(frozen=True)
class BigramOptions(Options):
    """The bigram model's hidden width multiple."""

    widen: int = option(2, "hidden units per model dimension", check=integer())


class BigramLM(TokenModel):
    """hidden_t = W₂ relu(W₁ e(token_t)): the next token from the current one alone."""

    dtype: Any = jnp.float32

    def setup(self) -> None:
        d = self.cfg.d_model
        USED["model"].append(type(self).__name__)
        self.token_embed = token_embedding(self.vocab_size, d, "embed")
        widen = self.cfg.options_of(BigramOptions).widen
        self.up = nn.Dense(widen * d, use_bias=False, **dense_axes(("embed", "mlp")))
        self.down = nn.Dense(d, use_bias=False, **dense_axes(("mlp", "embed")))

    def hidden_states(self, tokens: jax.Array, x: jax.Array, mask: jax.Array | None, train: bool) -> jax.Array:
        return self.down(nn.relu(self.up(x)))

    def init_decode_state(self, batch_size: int, max_len: int) -> jax.Array:
        return jnp.zeros((batch_size, 1), jnp.float32)

    def decode_step(self, state: jax.Array, token: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.down(nn.relu(self.up(self.token_embed(token)))), state


@dataclasses.dataclass(frozen=True)
class ScaledTeacherForcingOptions(Options):
    """The factor on the teacher-forced loss."""

    factor: float = option(1.0, "what the loss is multiplied by", check=number(0.0, open_low=True))


@dataclasses.dataclass(frozen=True)
class ScaledTeacherForcing(ScaledTeacherForcingOptions, TeacherForcing):
    """Teacher forcing with its loss times `factor`."""

    feeds_gold_only: ClassVar[bool] = True

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
        USED["objective"].append(self.factor)
        loss, metrics = super().__call__(*args, **kwargs)
        return self.factor * loss, metrics


@dataclasses.dataclass(frozen=True)
class SignSGDOptions(Options):
    """Sign SGD has no options but its name's."""

    scale: float = option(1.0, "factor on the learning rate")


def sign_sgd(options: SignSGDOptions, shared: SharedSettings) -> optax.GradientTransformation:
    USED["optimizer"].append(options.scale)
    return optax.chain(
        optax.stateless(lambda updates, params=None: jax.tree.map(jnp.sign, updates)),
        optax.add_decayed_weights(shared.weight_decay, shared.mask),
        optax.scale_by_learning_rate(lambda step: options.scale * shared.learning_rate(step)),
    )


@pytest.fixture
def registered_kinds():
    """The three kinds registered by one call each, taken out after the test."""
    MODELS.register("bigram", BigramLM, options=BigramOptions, families=("neural",))
    OBJECTIVES.register("scaled_teacher_forcing", ScaledTeacherForcing, options=ScaledTeacherForcingOptions)
    OPTIMIZERS.register("sign_sgd", sign_sgd, options=SignSGDOptions)
    yield
    MODELS.remove("bigram")
    OBJECTIVES.remove("scaled_teacher_forcing")
    OPTIMIZERS.remove("sign_sgd")
    for used in USED.values():
        used.clear()


def test_kinds_registered_from_outside_train_together_through_the_command_line(registered_kinds, tmp_path, capsys):
    chosen = [
        "model.kind=bigram",
        "model.bigram.widen=3",
        "objective.kind=scaled_teacher_forcing",
        "objective.scaled_teacher_forcing.factor=0.5",
        "optim.kind=sign_sgd",
        "optim.sign_sgd.scale=0.5",
    ]
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny(*chosen)]) == 0
    assert USED["model"] and USED["objective"] == [0.5] and USED["optimizer"] == [0.5]
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model"]["kind"] == "bigram" and saved["model"]["bigram"] == {"widen": 3}
    assert saved["objective"]["scaled_teacher_forcing"] == {"factor": 0.5}
    assert saved["optim"]["kind"] == "sign_sgd" and saved["optim"]["sign_sgd"] == {"scale": 0.5}
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["split"] == "train"]
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0]
    capsys.readouterr()
    assert main(["config", "--set", *chosen]) == 0
    printed = capsys.readouterr().out
    assert "[model.bigram]\nwiden = 3" in printed and "[optim.sign_sgd]" in printed
