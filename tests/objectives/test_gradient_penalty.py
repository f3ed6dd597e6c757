"""Embedding gradient penalty: the penalty and its gradient against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
from objective_toys import lm_batch, tiny

from seqjax.contracts import SPECIAL_IDS
from seqjax.model_head import embed_tokens, head_loss, hidden_states
from seqjax.objectives import GradientPenalty, TeacherForcing

VOCAB, LAMBDA = 7, 0.5


def setup():
    batch = lm_batch(np.random.default_rng(0), 2, 3, VOCAB)
    model, head, params = tiny("rnn", vocab=VOCAB, d_model=4, batch=batch)
    return model, head, params, batch


def test_penalty_is_lambda_times_squared_finite_difference_gradient_of_the_loss():
    model, head, params, batch = setup()
    key = jax.random.key(0)

    def cross_entropy(embedded):
        hidden = hidden_states(model, params, batch, jax.random.split(key)[0], train=True, embedded=embedded)
        return head_loss(model, head, params, hidden, batch, jax.random.split(key)[1])[0]

    embedded = embed_tokens(model, params, batch["inputs"])
    h = 1e-2
    basis = jnp.eye(embedded.size).reshape(-1, *embedded.shape)
    # Central differences along every embedding coordinate (24 of them), in one program.
    central = jax.vmap(lambda e: (cross_entropy(embedded + h * e) - cross_entropy(embedded - h * e)) / (2 * h))
    slopes = jax.jit(central)(basis)
    objective = GradientPenalty(penalty=LAMBDA)
    loss, metrics = jax.jit(lambda p: objective(model, head, p, batch, key, jnp.int32(0), ids=SPECIAL_IDS))(params)
    np.testing.assert_allclose(metrics["grad_norm_sq"], np.sum(np.square(slopes)), rtol=2e-2)
    np.testing.assert_allclose(loss, metrics["cross_entropy"] + LAMBDA * np.sum(np.square(slopes)), rtol=1e-4)


def test_gradient_of_the_penalized_loss_matches_a_finite_difference_along_a_direction():
    model, head, params, batch = setup()
    key = jax.random.key(1)

    def objective(p):
        # A large λ, so that the second-order term (through the RNN's custom VJP) dominates.
        return GradientPenalty(penalty=100.0)(model, head, p, batch, key, jnp.int32(0), ids=SPECIAL_IDS)[0]

    rng = np.random.default_rng(2)
    direction = jax.tree.map(lambda x: jnp.asarray(rng.standard_normal(x.shape), x.dtype), params)

    def shifted(t):
        return objective(jax.tree.map(lambda p, d: p + t * d, params, direction))

    h = 3e-3

    @jax.jit
    def both(params):
        grads = jax.grad(objective)(params)
        analytic = sum(jnp.vdot(g, d) for g, d in zip(jax.tree.leaves(grads), jax.tree.leaves(direction)))
        return (
            analytic,
            (shifted(h) - shifted(-h)) / (2 * h),
            objective(params),
            TeacherForcing()(model, head, params, batch, key, jnp.int32(0), ids=SPECIAL_IDS)[0],
        )

    analytic, numeric, penalized, plain = both(params)
    np.testing.assert_allclose(analytic, numeric, rtol=5e-3)
    assert penalized > plain  # the penalty is positive
