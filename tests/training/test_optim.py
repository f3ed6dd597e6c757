import numpy as np
import pytest

from seqjax.config import OptimConfig
from seqjax.training.optim import learning_rate_schedule, make_optimizer


@pytest.mark.parametrize("schedule", ["cosine", "linear", "constant"])
def test_schedule_warms_up_linearly_then_decays_to_the_end_fraction(schedule):
    cfg = OptimConfig(learning_rate=1.0, warmup_steps=10, schedule=schedule, end_lr_fraction=0.1)
    lr = learning_rate_schedule(cfg, 110)
    np.testing.assert_allclose([lr(0), lr(5), lr(10)], [0.0, 0.5, 1.0], atol=1e-6)
    assert float(lr(110)) == pytest.approx(1.0 if schedule == "constant" else 0.1, abs=1e-6)


@pytest.mark.parametrize(
    "field, value", [("schedule", "step"), ("learning_rate", 0.0), ("accum_steps", 0), ("clip_norm", -1.0)]
)
def test_bad_optimizer_settings_are_rejected(field, value):
    with pytest.raises(ValueError, match=f"optim.{field}"):
        make_optimizer(OptimConfig(**{field: value}), 100)
