"""The encoder–decoder benchmark (benchmarks/seq2seq_train.py) builds runnable train steps on
both sides, and its torch models are seqjax's size up to the LSTMs' second bias vector."""

import jax
import numpy as np
import pytest
from project_scripts import load_script

from seqjax.config import HeadConfig
from seqjax.heads import build_head
from seqjax.models import build_model
from seqjax.model_head import init_params

bench = load_script("benchmarks/seq2seq_train.py", "seq2seq_train_benchmark")
MODELS = list(bench.SETUPS)


def seqjax_parameter_count(setup) -> int:
    """Model + head parameters, shaped by `init_params` but never initialized (nothing compiles)."""
    model = build_model(setup.cfg, setup.vocab, src_vocab_size=setup.vocab)
    head = build_head(HeadConfig(kind="full"), setup.vocab, np.ones(setup.vocab, np.int64))
    batch = bench.synthetic_batch(setup)
    shapes = jax.eval_shape(lambda key: init_params(model, head, key, batch), jax.random.key(0))
    return sum(leaf.size for leaf in jax.tree.leaves(shapes))


def torch_extra_parameters(cfg) -> int:
    """torch's LSTMs keep b_hh beside b_ih (seqjax: one bias), 4H per direction and layer;
    nn.Transformer matches seqjax's Transformer exactly."""
    if cfg.kind == "transformer_seq2seq":
        return 0
    d, dirs = cfg.d_model, 2 if cfg.bidirectional else 1
    return cfg.layers * (dirs * 4 * (d // dirs) + 4 * d)  # encoder, decoder


def test_quick_and_full_setups_cover_the_same_models():
    assert list(bench.QUICK_SETUPS) == MODELS == list(bench.TORCH_MODELS)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_seqjax_step_runs_at_quick_shapes_and_counts_every_parameter(name):
    setup = bench.QUICK_SETUPS[name]
    run, count = bench.seqjax_step(setup)
    run(1)
    assert count == seqjax_parameter_count(setup)


@pytest.mark.parametrize("name", MODELS)
def test_torch_step_runs_at_quick_shapes_with_seqjax_parameters_plus_lstm_biases(name):
    torch = pytest.importorskip("torch")
    setup = bench.QUICK_SETUPS[name]
    run, count = bench.torch_step(setup)
    # One thread: beside other test workers, an OpenMP thread waiting on a descheduled sibling
    # turns this millisecond step into seconds.
    torch.set_num_threads(1)
    run(1)
    assert count - seqjax_parameter_count(setup) == torch_extra_parameters(setup.cfg)


@pytest.mark.parametrize("name", MODELS)
def test_full_size_parameter_counts_differ_only_by_lstm_biases_under_a_tenth_of_a_percent(name):
    torch = pytest.importorskip("torch")
    setup = bench.SETUPS[name]
    module, _ = bench.TORCH_MODELS[name](torch, setup)
    seqjax_count = seqjax_parameter_count(setup)
    gap = sum(p.numel() for p in module.parameters()) - seqjax_count
    assert gap == torch_extra_parameters(setup.cfg)
    assert gap / seqjax_count < 1e-3
