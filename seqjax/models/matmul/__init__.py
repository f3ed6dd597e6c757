"""Matmul layouts the models share: weight gradients written row by row (`rows_matmul`) and the
dense layers of a decode step (`step_dense`)."""
