"""benchmarks/softmax_estimate.py's class walk: the trips it tells the model, by the tier a loop's
scope names, and the steps of the timed batch beyond each tier's slots."""

import numpy as np
import pytest
from project_scripts import load_script

estimate = load_script("benchmarks/softmax_estimate.py", "softmax_estimate_benchmark")
steps = load_script("benchmarks/class_steps.py", "softmax_estimate_class_steps")

VOCAB, SHAPES = 2_000, estimate.Shapes(rows=512, features=16, samples=8)


def test_each_loop_of_the_walk_takes_its_tiers_trips_and_any_other_loop_is_refused():
    trips = estimate.tier_trips([1.0, 1.5, 2.25])
    inner = 'metadata={op_name="jit(loss)/jvp(ClassSoftmax.loss)/class_walk_tier2/while/body/closed_call/while"}'
    assert trips(f"  %while.9 = (s32[]) while(%t), body=%b, {inner}") == 2.25
    assert trips('  %while.3 = (s32[]) while(%t), body=%b, metadata={op_name="jit(loss)/jvp(class_walk_tier1)"}') == 1.5
    assert estimate.constant_trips(2)(inner) == 2  # the table's "two trips per entry", any loop
    with pytest.raises(ValueError, match="outside the class walk: jit.loss./cond/while"):
        trips('  %while.4 = (s32[]) while(%t), body=%b, metadata={op_name="jit(loss)/cond/while"}')


def test_the_walk_counts_the_steps_of_the_timed_batch_and_those_beyond_each_tiers_slots():
    walk = estimate.class_walk(VOCAB, SHAPES)
    classes = estimate.class_head(VOCAB, SHAPES).classes
    _, _, targets = estimate.make_inputs(VOCAB, SHAPES)
    rows = walk["rows_per_step"]
    assert rows == estimate.rows_per_step(SHAPES.rows, classes.num_classes)
    tiers = estimate.tiers_of(classes.starts, classes.sizes, estimate._tier_of_class(classes), classes.shares)
    capacities = estimate.slot_capacities(tiers, SHAPES.rows, rows)
    assert walk["slots"] == sum(capacities) > 0
    per_class = -(-np.bincount(classes.class_of[np.asarray(targets)], minlength=classes.num_classes) // rows)
    beyond = [max(0, per_class[tier.classes].sum() - c) for tier, c in zip(tiers, capacities)]
    assert walk["per_tier"] == beyond and walk["steps"] == per_class.sum()
    # the walk's loops: its slots, and the steps beyond them
    assert steps.walk_steps(classes, np.asarray(targets), rows) == walk["slots"] + sum(beyond)
