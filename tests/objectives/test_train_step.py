"""Every objective runs inside the real jitted train step, on a tiny model.

Recurrent models compile fastest; REINFORCE runs on an encoder-decoder, whose source must
reach the decode step. The Transformer paths are exercised in test_scheduled_sampling.py. The
objectives that train one model kind each (vae, bidirectional_lm, masked_lm, electra) take
their train steps in the runs of tests/training (test_vae_run.py, test_bilm_run.py,
test_encoder_run.py).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax import config as config_lib
from seqjax import optimizers as optim
from seqjax.config import Config
from seqjax.contracts import SPECIAL_IDS
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import batch_sharding, make_mesh
from seqjax.training.core.state import init_state
from seqjax.training.core.steps import make_train_step

TINY = [
    "data.num_train=200",
    "data.num_eval=8",
    "data.seq_len=8",
    "data.max_pair_len=6",
    "data.buckets=(8,)",
    "model.d_model=16",
    "model.layers=1",
    "train.batch_size=8",
    "train.steps=2",
    "optim.warmup_steps=0",
    "optim.schedule=constant",
]


LM = ["model.kind=rnn"]
SEQ2SEQ = ["model.kind=attention_seq2seq", "data.task=reverse", "model.bidirectional=false"]


@functools.cache
def initial_state(setup: tuple[str, ...]):
    """(state, batch, mesh) for a model and data setup, built once: objectives do not change it."""
    exp = build_experiment(config_lib.override(Config(), TINY + list(setup)))
    mesh = make_mesh("data:1", jax.devices()[:1])
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    batch = exp.train_batches().batch(0)
    return init_state(exp.model, exp.head, optimizer, exp.cfg.train.seed, batch, mesh), batch, mesh


@pytest.mark.slow
@pytest.mark.parametrize(
    "setup, objective, metric",
    [
        (LM, ["objective.kind=scheduled_sampling"], "epsilon"),
        (LM, ["objective.kind=random_replacement"], "replaced"),
        (LM, ["objective.kind=gradient_penalty"], "grad_norm_sq"),
        (SEQ2SEQ, ["objective.kind=reinforce"], "baseline"),
        (LM, ["objective.kind=mixer", "objective.mixer.baseline=mean"], "delta"),
        (
            LM,
            [
                "objective.kind=minimum_risk",
                "objective.minimum_risk.search=beam",
                "objective.minimum_risk.mle_weight=0.5",
            ],
            "mle_loss",
        ),
    ],
    ids=["scheduled_sampling", "random_replacement", "gradient_penalty", "reinforce", "mixer", "minimum_risk"],
)
def test_the_train_step_takes_the_objectives_loss_at_its_key_and_step(setup, objective, metric):
    exp = build_experiment(config_lib.override(Config(), TINY + setup + objective))
    shared, batch, mesh = initial_state(tuple(setup))
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    schedule = optim.learning_rate_schedule(exp.cfg.optim, exp.cfg.train.steps)
    state = jax.tree.map(jnp.copy, shared)  # the step donates its input state
    step = make_train_step(exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state)

    _, metrics = step(state, jax.device_put(batch, batch_sharding(mesh)))

    # The reference: the objective called directly at step 0 with the step's key, fold_in(key, step).
    direct = jax.jit(
        lambda params: exp.objective(
            exp.model, exp.head, params, batch, jax.random.fold_in(shared.key, 0), jnp.int32(0), ids=SPECIAL_IDS
        )
    )
    loss, aux = jax.device_get(direct(shared.params))
    metrics = jax.device_get(metrics)
    assert metric in aux and float(metrics["grad_norm"]) > 0
    for name, value in dict(aux, loss=loss).items():
        np.testing.assert_allclose(metrics[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


def test_build_objective_reports_bad_options_with_the_config_field():
    message = "objective.scheduled_sampling.k must be a number >= 1 for the inverse_sigmoid schedule, got 0.5"
    with pytest.raises(ValueError, match=message):
        build_experiment(
            config_lib.override(
                Config(), TINY + ["objective.kind=scheduled_sampling", "objective.scheduled_sampling.k=0.5"]
            )
        )
    with pytest.raises(ValueError, match="objective.kind must be one of"):
        build_experiment(config_lib.override(Config(), TINY + ["objective.kind=gan"]))
