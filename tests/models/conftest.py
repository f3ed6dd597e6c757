"""Shared fixture: model variables drawn at random from the shapes `init` would create.

Running a model's real `init` compiles every initializer and costs seconds per model;
the contract tests only need some non-trivial float32 weights of the right shapes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest


def draw_variables(model, *args, seed=0, scale=0.3, **kwargs):
    """N(0, scale²) arrays shaped like model.init(*args, **kwargs), traced but not run."""
    shapes = jax.eval_shape(lambda key: model.init(key, *args, **kwargs), jax.random.key(0))
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda leaf: jnp.asarray(scale * rng.standard_normal(leaf.shape), leaf.dtype), shapes)


@pytest.fixture(scope="session")
def random_variables():
    return draw_variables
