"""benchmarks/class_steps.py: the steps it counts are the walk's, and its GPU row is the GPU
benchmark's shape."""

import argparse
import dataclasses

import numpy as np
from project_scripts import load_script

from seqjax.heads import frequency_classes

steps = load_script("benchmarks/class_steps.py", "class_steps_benchmark")
cases = load_script("benchmarks/softmax_cases.py", "class_steps_benchmark_cases")


def test_a_walk_takes_a_step_per_step_of_each_classes_rows_and_each_tiers_slots_at_least():
    classes = frequency_classes([50, 20, 10, 10, 5, 5], 3)  # {0}, {1}, {2, 3, 4, 5}
    unshared = dataclasses.replace(classes, shares=None)  # no slots
    targets = np.array([0] * 9 + [2, 3, 5], np.int32)  # 9 rows in class 0, none in 1, 3 in 2
    assert steps.walk_steps(unshared, targets, 8) == 2 + 0 + 1
    assert steps.walk_steps(unshared, targets, 3) == 3 + 0 + 1
    assert steps.walk_steps(unshared, targets, 16) == 1 + 0 + 1
    # 4 rows in each class, a step each: what the slots for 12 rows of these shares hold
    assert steps.walk_steps(classes, np.array([0, 1, 2] * 4, np.int32), 8) == 3


def test_the_counted_gpu_row_has_the_gpu_benchmarks_rows_and_features():
    parser = argparse.ArgumentParser()
    cases.Shapes.add_arguments(parser)
    gpu = cases.Shapes.parsed(parser.parse_args([]))
    rows, _, features = steps.GPU_SHAPE
    assert (rows, features) == (gpu.rows, gpu.features)
