"""benchmarks/softmax_estimate.py's class walk: the trips it tells the model, by the tier a loop's
scope names, and the program it estimates for the walk of 8 rows a step, which must be the
class head's loss."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from project_scripts import load_script

from seqjax.heads import class_softmax_loss

estimate = load_script("benchmarks/softmax_estimate.py", "softmax_estimate_benchmark")
steps = load_script("benchmarks/class_steps.py", "softmax_estimate_class_steps")

VOCAB, SHAPES = 2_000, estimate.Shapes(rows=512, features=16, samples=8)


def test_each_loop_of_the_walk_takes_its_tiers_trips_and_any_other_loop_is_refused():
    trips = estimate.tier_trips([1.0, 1.5, 2.25])
    inner = 'metadata={op_name="jit(loss)/jvp(ClassSoftmax.loss)/class_walk_tier2/while/body/closed_call/while"}'
    assert trips(f"  %while.9 = (s32[]) while(%t), body=%b, {inner}") == 2.25
    assert trips('  %while.3 = (s32[]) while(%t), body=%b, metadata={op_name="jit(loss)/jvp(class_walk_tier1)"}') == 1.5
    with pytest.raises(ValueError, match="outside the class walk: jit.loss./cond/while"):
        trips('  %while.4 = (s32[]) while(%t), body=%b, metadata={op_name="jit(loss)/cond/while"}')


@pytest.mark.parametrize("step_rows", [0, 8])
def test_the_walk_counts_the_steps_of_the_timed_batch_tier_by_tier(step_rows):
    walk = estimate.class_walk(VOCAB, SHAPES, step_rows)
    classes = estimate.class_head(VOCAB, SHAPES).classes
    _, _, targets = estimate.make_inputs(VOCAB, SHAPES)
    rows = walk["rows_per_step"]
    assert rows == (step_rows or estimate.rows_per_step(SHAPES.rows, classes.num_classes))
    # walk_steps adds the outer loop's trip per class to the steps over the rows
    assert walk["steps"] == steps.walk_steps(classes, np.asarray(targets), rows) - classes.num_classes
    tiers = estimate.tiers_of(classes.starts, classes.sizes, estimate._tier_of_class(classes))
    sizes = np.array([tier.classes.size for tier in tiers])
    assert np.dot(walk["per_tier"], sizes) == pytest.approx(walk["steps"])


def test_the_program_of_8_rows_a_step_is_the_class_heads_loss_and_gradients():
    fn, (params, hidden, targets) = estimate.class_program(VOCAB, SHAPES, estimate.MIN_ROWS_PER_STEP)
    rng = np.random.default_rng(0)
    values = tuple(jnp.asarray(0.1 * rng.normal(size=p.shape), jnp.float32) for p in params)
    h = jnp.asarray(rng.normal(size=hidden.shape), jnp.float32)
    t = jnp.asarray(rng.integers(0, VOCAB, size=targets.shape), jnp.int32)
    classes = estimate.class_head(VOCAB, SHAPES).classes

    def head_loss(params, h):
        class_weights, class_biases, weights, biases = params
        return class_softmax_loss(h, class_weights, class_biases, weights, biases, t, classes).mean()

    value, grads = jax.jit(fn)(values, h, t)
    expected, expected_grads = jax.value_and_grad(head_loss, argnums=(0, 1))(values, h)
    np.testing.assert_allclose(value, expected, rtol=1e-5)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(expected_grads)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
