"""The jitted train step: one device against eight, and gradient accumulation against the
whole batch at once when microbatches hold unequal numbers of target tokens."""

import jax
import numpy as np
import pytest
from helpers import EXACT_UPDATES, assert_trains_alike
from tiny_runs import tiny_config

from seqjax import optimizers as optim
from seqjax.contracts import SPECIAL_IDS
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import batch_sharding, make_mesh
from seqjax.training.core.state import init_state
from seqjax.training.core.steps import make_train_step

LR = 1e-3
STEPS = 4


def run_steps(exp, mesh, batches):
    """(params, [(loss, grad_norm) of each step]) of one update per batch, from the run's initial state."""
    cfg = exp.cfg
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, batches[0], mesh)
    step = make_train_step(
        exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state, accum_steps=cfg.optim.accum_steps
    )
    records = []
    for batch in batches:
        state, metrics = step(state, jax.device_put(batch, batch_sharding(mesh)))
        records.append((float(metrics["loss"]), float(metrics["grad_norm"])))
    return jax.device_get(state.params), records


def test_a_recurrent_model_on_eight_devices_trains_like_one_device():
    """(The Transformer under every strategy: test_sharding.py.)"""
    exp = build_experiment(tiny_config("model.kind=rnn", *EXACT_UPDATES, f"optim.learning_rate={LR}"))
    batches = [exp.train_batches().batch(i) for i in range(STEPS)]
    one = run_steps(exp, make_mesh("data:1", jax.devices()[:1]), batches)
    eight = run_steps(exp, make_mesh("data:8", jax.devices()[:8]), batches)
    assert_trains_alike(eight, one, learning_rate=LR, steps=STEPS)


ACCUM = 2
SEQ2SEQ = (
    "data.task=reverse",
    "model.kind=rnn_seq2seq",
    "data.max_pair_len=8",
    "data.buckets=9",
    *EXACT_UPDATES,
    f"optim.learning_rate={LR}",
)


def unbalanced(batch):
    """The batch's rows reordered so that microbatch 0 (rows 0, 2, ...: `steps._microbatches`)
    holds the rows with the most target tokens and microbatch 1 those with the fewest."""
    order = np.argsort(-batch["mask"].sum(axis=1), kind="stable")
    rows = np.empty_like(order)
    rows[0::ACCUM], rows[1::ACCUM] = order[: len(order) // ACCUM], order[len(order) // ACCUM :]
    return {name: value[rows] for name, value in batch.items()}


@pytest.fixture(scope="module")
def seq2seq_batches():
    exp = build_experiment(tiny_config(*SEQ2SEQ))
    return exp, [unbalanced(exp.train_batches().batch(i)) for i in range(STEPS)]


def test_plain_averaging_of_the_unbalanced_microbatches_would_give_another_gradient(seq2seq_batches):
    """What makes the next test meaningful: the microbatches hold clearly unequal token counts,
    and the plain mean of their gradients is measurably not the whole batch's gradient."""
    exp, batches = seq2seq_batches
    mesh = make_mesh("data:1", jax.devices()[:1])
    optimizer = optim.make_optimizer(exp.cfg.optim, exp.cfg.train.steps)
    params = init_state(exp.model, exp.head, optimizer, exp.cfg.train.seed, batches[0], mesh).params

    @jax.jit
    def grads(batch):
        def loss(p):
            return exp.objective(exp.model, exp.head, p, batch, jax.random.key(0), 0, ids=SPECIAL_IDS)[0]

        return jax.grad(loss)(params)

    micro = [{k: v[a::ACCUM] for k, v in batches[0].items()} for a in range(ACCUM)]
    tokens = [float(m["mask"].sum()) for m in micro]
    assert tokens[0] > 1.3 * tokens[1]
    whole, parts = grads(batches[0]), [grads(m) for m in micro]
    plain = jax.tree.map(lambda *g: sum(g) / ACCUM, *parts)
    weighted = jax.tree.map(lambda *g: sum(n * x for n, x in zip(tokens, g)) / sum(tokens), *parts)
    norm = lambda tree: float(np.sqrt(sum(np.sum(np.square(x)) for x in jax.tree.leaves(tree))))  # noqa: E731
    difference = lambda a, b: norm(jax.tree.map(lambda x, y: x - y, a, b))  # noqa: E731
    assert difference(weighted, whole) < 1e-5 * norm(whole)  # token-share weighting is the whole batch
    assert difference(plain, whole) > 1e-2 * norm(whole)
    assert abs(norm(plain) - norm(whole)) > 1e-3 * norm(whole)  # visible in the reported grad_norm too


def test_accumulating_padded_microbatches_equals_the_update_of_the_whole_batch(seq2seq_batches):
    """optim.accum_steps=2 on seq2seq batches whose microbatches hold unequal numbers of target
    tokens gives the losses, gradient norms and parameters of one-shot updates."""
    exp, batches = seq2seq_batches
    mesh = make_mesh("data:1", jax.devices()[:1])
    whole = run_steps(exp, mesh, batches)
    accumulated = run_steps(build_experiment(tiny_config(*SEQ2SEQ, f"optim.accum_steps={ACCUM}")), mesh, batches)
    assert_trains_alike(accumulated, whole, learning_rate=LR, steps=STEPS)


@pytest.mark.parametrize(
    "step_kind, strategy, message",
    [("pmap", "data", "step_kind must be one of jit, shard_map, got 'pmap'"), ("shard_map", "fsdp", "strategy='data'")],
)
def test_make_train_step_refuses_an_unknown_step_kind_and_a_shard_map_step_not_data_parallel(
    step_kind, strategy, message
):
    exp = build_experiment(tiny_config())
    cfg, mesh = exp.cfg, make_mesh("data:1", jax.devices()[:1])
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, exp.train_batches().batch(0), mesh)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    with pytest.raises(ValueError, match=message):
        make_train_step(
            exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state, strategy=strategy, step_kind=step_kind
        )
