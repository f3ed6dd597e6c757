"""`target_log_probs`, what exact evaluation scores: log p(target) of every head equals its
`log_probs` at the target, computed in vocabulary blocks without an [N, V] value."""

import dataclasses
import os
import sys

import jax
import numpy as np
import pytest

from seqjax.config import HeadConfig
from seqjax.heads import AdaptiveOptions, ClassOptions, adaptive_tails, build_head, full

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from jaxpr_tools import equations  # noqa: E402

VOCAB, FEATURES, ROWS, BLOCK = 40, 8, 16, 7  # 7 divides neither V, the adaptive head (11) nor its tail (30)
COUNTS = np.concatenate([[0, 0, 30, 0], np.arange(VOCAB - 4, 0, -1) * 3])
BASE = HeadConfig(num_samples=6, groups=(ClassOptions(num_classes=5), AdaptiveOptions(cutoffs=(10,), div_value=2.0)))
CASES = [
    ("full", False),
    ("sampled", False),
    ("nce", False),
    ("negative", True),
    ("class", False),
    ("tree", False),
    ("adaptive", False),
]


def shapes(fn, *args) -> set[tuple[int, ...]]:
    """The shapes of every value `fn(*args)` traces, nested programs included."""
    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    return {tuple(v.aval.shape) for eqn in equations(jaxpr) for v in eqn.outvars}


@pytest.mark.parametrize("kind, tied", CASES)
def test_target_log_probs_equal_the_log_probs_at_the_targets_in_blocks_that_do_not_divide_v(kind, tied, monkeypatch):
    # Blocks of BLOCK words: the eval blocks (DEFAULT_CHUNK), and the adaptive head's at any shape.
    monkeypatch.setattr(full, "MATERIALIZE_LIMIT", 0)
    monkeypatch.setattr(full, "DEFAULT_CHUNK", BLOCK)
    monkeypatch.setattr(adaptive_tails, "TAIL_CHUNK", BLOCK)
    head = build_head(dataclasses.replace(BASE, kind=kind, tied=tied), VOCAB, COUNTS)  # a Huffman tree
    keys = jax.random.split(jax.random.key(0), 4)
    hidden = 3.0 * jax.random.normal(keys[0], (ROWS, FEATURES))
    targets = jax.random.randint(keys[1], (ROWS,), 0, VOCAB)
    embedding = jax.random.normal(keys[2], (VOCAB, FEATURES)) if tied else None
    variables = jax.jit(lambda key: head.init({"params": key}, hidden, embedding, method="log_probs"))(keys[3])

    def target_log_probs(hidden):
        return head.apply(variables, hidden, targets, embedding, method="target_log_probs")

    def both(hidden):
        return target_log_probs(hidden), head.apply(variables, hidden, embedding, method="log_probs")

    got, log_probs = jax.jit(both)(hidden)
    assert got.shape == (ROWS,) and got.dtype == np.float32
    np.testing.assert_allclose(got, np.asarray(log_probs)[np.arange(ROWS), targets], rtol=1e-5, atol=1e-5)
    assert not {(ROWS, VOCAB), (VOCAB, ROWS)} & shapes(target_log_probs, hidden)
