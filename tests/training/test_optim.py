import numpy as np
import pytest

from seqjax.config import OptimConfig
from seqjax.optimizers import learning_rate_schedule, make_optimizer
from seqjax.optimizers.adamw import AdamWOptions


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


def test_updates_clip_gradients_by_their_global_norm_across_leaves():
    # Leaf "b" is small at step 1 and large at step 2, "a" of norm 5 at both: clipping each leaf by its
    # own norm scales b's two gradients differently from one global factor per step, and Adam's
    # second update depends on that ratio (its first is invariant to any per-leaf scale).
    cfg = OptimConfig(
        learning_rate=0.1,
        schedule="constant",
        warmup_steps=0,
        weight_decay=0.0,
        clip_norm=1.0,
        groups=(AdamWOptions(b1=0.5, b2=0.75),),
    )
    steps = [
        {"a": np.array([3.0, -4.0]), "b": np.array([0.1, 0.2])},
        {"a": np.array([-4.0, 3.0]), "b": np.array([2.0, -1.0])},
    ]
    optimizer = make_optimizer(cfg, 10)
    params = {"a": np.zeros(2, np.float32), "b": np.zeros(2, np.float32)}
    state = optimizer.init(params)
    m = {k: np.zeros(2) for k in params}
    v = {k: np.zeros(2) for k in params}
    for t, grads in enumerate(steps, start=1):
        update, state = optimizer.update({k: g.astype(np.float32) for k, g in grads.items()}, state, params)
        scale = min(1.0, cfg.clip_norm / np.sqrt(sum((g**2).sum() for g in grads.values())))
        for k, g in grads.items():
            m[k] = cfg.options.b1 * m[k] + (1 - cfg.options.b1) * g * scale
            v[k] = cfg.options.b2 * v[k] + (1 - cfg.options.b2) * (g * scale) ** 2
            m_hat, v_hat = m[k] / (1 - cfg.options.b1**t), v[k] / (1 - cfg.options.b2**t)
            np.testing.assert_allclose(update[k], -cfg.learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8), rtol=1e-5)
