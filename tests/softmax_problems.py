"""A random softmax problem for the heads' tests."""

import numpy as np


def random_problem(seed, *, rows, features, vocab):
    """hidden [rows, features], weights [vocab, features], biases [vocab] (all N(0, 1),
    float32) and targets [rows] int32 uniform over the vocabulary, drawn in that order."""
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(rows, features)).astype(np.float32),
        rng.normal(size=(vocab, features)).astype(np.float32),
        rng.normal(size=(vocab,)).astype(np.float32),
        rng.integers(0, vocab, size=rows).astype(np.int32),
    )
