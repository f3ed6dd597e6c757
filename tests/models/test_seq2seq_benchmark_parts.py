"""The encoder–decoder benchmark (benchmarks/seq2seq_train.py) builds a runnable seqjax train
step that counts every parameter. Its torch side runs with the benchmark where torch is installed;
torch is not a test dependency."""

import jax
import numpy as np
import pytest
from project_scripts import load_script

from seqjax.config import HeadConfig
from seqjax.heads import build_head
from seqjax.model_head import init_params
from seqjax.models import build_model

bench = load_script("benchmarks/seq2seq_train.py", "seq2seq_train_benchmark")
MODELS = list(bench.SETUPS)


def seqjax_parameter_count(setup) -> int:
    """Model + head parameters, shaped by `init_params` but never initialized (nothing compiles)."""
    model = build_model(setup.cfg, setup.vocab, src_vocab_size=setup.vocab)
    head = build_head(HeadConfig(kind="full"), setup.vocab, np.ones(setup.vocab, np.int64))
    batch = bench.synthetic_batch(setup)
    shapes = jax.eval_shape(lambda key: init_params(model, head, key, batch), jax.random.key(0))
    return sum(leaf.size for leaf in jax.tree.leaves(shapes))


def test_quick_and_full_setups_cover_the_same_models():
    assert list(bench.QUICK_SETUPS) == MODELS == list(bench.TORCH_MODELS)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_seqjax_step_runs_at_quick_shapes_and_counts_every_parameter(name):
    setup = bench.QUICK_SETUPS[name]
    run, count = bench.seqjax_step(setup)
    run(1)
    assert count == seqjax_parameter_count(setup)
