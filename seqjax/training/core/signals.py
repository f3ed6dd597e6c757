"""Stopping a run between two steps when asked to: SIGINT (Ctrl-C) or SIGTERM (a scheduler's
notice before it preempts the job).

While a `StopRequest` is entered, the first of these signals only records itself: the
training loop finishes the step it is in, checkpoints it and raises `TrainingStopped`, which
the command line turns into exit status 128 + the signal's number (130, 143). The signal
handlers that were there before are put back as soon as one signal arrives, so a second one
takes the ordinary path at once: SIGINT raises KeyboardInterrupt, SIGTERM ends the process.

Every process of a multi-process run must stop after the same step, or the others would
wait forever in the next step's collectives; a scheduler signals each process at its own
moment. So processes compare their requests (an all-gather of one integer) only at steps
they all pass the same way: every step whose metrics the host fetches anyway, and every
`SYNC_EVERY` steps. A single process reads its own request after every step.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

SIGNALS = (signal.SIGINT, signal.SIGTERM)
SYNC_EVERY = 10  # steps between the processes' comparisons, at most


class TrainingStopped(Exception):
    """The run stopped after `step` on signal `signum`, its checkpoint written."""

    def __init__(self, step: int, signum: int):
        super().__init__(f"stopped at step {step}, checkpoint written; run the same command to resume")
        self.step = step
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, what a shell reports for a process the signal ended."""
        return 128 + self.signum


class StopRequest:
    """A context in which SIGINT and SIGTERM ask the run to stop instead of ending it.

    Handlers can only be set from the main thread; entered from another thread, this records
    nothing and signals keep their usual effect.
    """

    def __init__(self) -> None:
        self.signum = 0  # the first signal received, 0 for none
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._receive) for s in SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._restore()

    def _receive(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        self._restore()  # a second signal aborts

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def agreed(self, step: int, fetched: bool) -> int:
        """The signal every process stops on after `step` (1-based count of steps done), 0 to go
        on. `fetched`: this step's metrics were fetched to the host, a point every process
        passes, where the comparison costs no extra wait for the devices."""
        if jax.process_count() == 1:
            return self.signum
        if not fetched and step % SYNC_EVERY:
            return 0
        return int(np.max(multihost_utils.process_allgather(np.int32(self.signum))))
