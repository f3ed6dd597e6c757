"""Each encoder–decoder learns the synthetic reverse task to >= 95% greedy exact match.

Sources of 2..8 symbols (data.max_pair_len keeps those of the train split; the valid split is cut
to them here), one bucket, so the train step and the decoder compile once each. The run
uses the library's train step on one device and its greedy decoding (`translate_texts`);
the budget is well under a CPU-minute per model.
"""

import jax
import numpy as np
import pytest

from seqjax import optimizers as optim
from seqjax.config import Config, override
from seqjax.training.core.experiment import build_experiment
from seqjax.training.core.layout import make_mesh
from seqjax.training.core.state import init_state
from seqjax.training.core.steps import make_train_step
from seqjax.training.features.generation import DecodeOptions, translate_texts

pytestmark = pytest.mark.slow  # long tests: scheduled first (tests/conftest.py)

MAX_LEN = 8
COMMON = [
    "data.kind=synthetic",
    "data.task=reverse",
    "data.num_train=20000",
    "data.num_eval=600",
    f"data.max_pair_len={MAX_LEN}",
    f"data.buckets={MAX_LEN + 1}",
    "model.dropout=0",
    "train.batch_size=64",
    "optim.warmup_steps=50",
]
# The suite compiles without LLVM's optimizations (conftest.py); these steps run hundreds of
# times, so they are compiled with them, XLA's default level: 2-3x faster steps for about a
# second more of compilation (200 of the RNN's steps: 2.8 s in place of 7.5).
FULLY_OPTIMIZED = {"xla_backend_optimization_level": 3}
SETTINGS = {
    "rnn_seq2seq": ["model.d_model=128", "model.layers=1", "train.steps=500", "optim.learning_rate=1e-2"],
    "attention_seq2seq": ["model.d_model=64", "model.layers=1", "train.steps=100", "optim.learning_rate=2e-2"],
    "transformer_seq2seq": [
        "model.d_model=64",
        "model.layers=2",
        "model.num_heads=4",
        "model.d_ff=128",
        "model.max_len=32",  # the valid split, scored whole at evaluation, holds pairs of up to 21 positions
        "train.steps=200",
        "optim.learning_rate=5e-3",
    ],
}


def trained_params(exp):
    """Runs cfg.train.steps updates of the library's jitted train step on one device."""
    cfg = exp.cfg
    mesh = make_mesh("data:1", jax.devices()[:1])
    batches = exp.train_batches()
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    state = init_state(exp.model, exp.head, optimizer, cfg.train.seed, batches.batch(0), mesh)
    train_step = make_train_step(exp.model, exp.head, exp.objective, optimizer, schedule, mesh, state)
    train_step = train_step.lower(state, batches.batch(0)).compile(compiler_options=FULLY_OPTIMIZED)
    for step in range(cfg.train.steps):
        state, metrics = train_step(state, batches.batch(step))
    assert np.isfinite(float(metrics["loss"]))
    return state.params


@pytest.mark.parametrize("kind", SETTINGS)
def test_seq2seq_model_learns_to_reverse_short_sequences(kind):
    exp = build_experiment(override(Config(), [*COMMON, f"model.kind={kind}", *SETTINGS[kind]]))
    params = trained_params(exp)
    sources, _ = exp.data.splits["valid"]
    short = [i for i, source in enumerate(sources) if len(source) <= MAX_LEN]
    hypotheses = translate_texts(exp, params, [sources[i] for i in short], DecodeOptions())
    references = [exp.data.references["valid"][i] for i in short]
    exact = np.mean([h == r for h, r in zip(hypotheses, references)])
    assert len(short) > 150 and exact >= 0.95, f"{kind}: exact match {exact:.1%} on {len(short)} sequences"
