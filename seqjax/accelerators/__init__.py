"""Compiling runs for accelerators this machine does not have: GPU and TPU targets (`targets`),
a run's steps built from abstract state on their devices (`abstract_run`), what the compiled
programs hold (`program`), the kernels of a GPU program (`kernels`) and the step time they add up
to (`estimate`, calibrated by the measurements in calibration.json), and `seqjax compile`'s
answer (`report`)."""
