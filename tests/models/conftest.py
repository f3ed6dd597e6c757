"""Shared fixtures: model variables drawn at random from the shapes `init` would create, and
the models built on them once per run.

Running a model's real `init` compiles every initializer and costs seconds per model;
the contract tests only need some non-trivial float32 weights of the right shapes.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest


def draw_variables(model, *args, seed=0, scale=0.3, **kwargs):
    """N(0, scale²) arrays shaped like model.init(*args, **kwargs), traced but not run."""
    shapes = nn.meta.unbox(jax.eval_shape(lambda key: model.init(key, *args, **kwargs), jax.random.key(0)))
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda leaf: jnp.asarray(scale * rng.standard_normal(leaf.shape), leaf.dtype), shapes)


@pytest.fixture(scope="session")
def random_variables():
    return draw_variables


@pytest.fixture(scope="session")
def built_once():
    """build(cls, name) -> cls(name, draw_variables), made once per (cls, name) for the whole
    run: a model with its random weights and compiled forward, shared by the tests."""
    built = {}

    def build(cls, name):
        if (cls, name) not in built:
            built[cls, name] = cls(name, draw_variables)
        return built[cls, name]

    return build
