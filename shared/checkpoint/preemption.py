"""SIGTERM (TPU/GCE preemption, SLURM, Kubernetes) and SIGINT (Ctrl-C) -> a flag the training loops poll.

The handler only records the signal: saving from inside a signal handler could interrupt an
orbax/jax call mid-way. The loops (Trainer.fit, RLLearner.fit) check `flag.agreed()` once per step, save
with `force=True`, wait for the save and exit with 128 + the signal (143 for SIGTERM, 130 for SIGINT).

Multi-host: each process sees its own signal, possibly at different steps; `agreed()` is a collective OR of
the flag over all processes, taken at the same step by every process, so all of them save the same step
(a save is collective: acting on a per-process flag would deadlock it).

Outside those loops (setup, the final evaluation or sample) shared.launch's `raise_on_signals` turns the same
signals into `Interrupted`, which it reports as one line with the same exit code: the last checkpoint is
then complete, and re-running the command resumes (or rebuilds the summary of a finished run).
"""
from __future__ import annotations

import signal
import threading

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PreemptionFlag:
    """Set by the installed signal handler; `uninstall()` puts the previous handlers back."""

    def __init__(self, signals: tuple[int, ...]):
        self.signals = signals
        self.received: int | None = None  # the signal number that set the flag
        self._previous: dict[int, object] = {}

    def is_set(self) -> bool:
        return self.received is not None

    def agreed(self) -> bool:
        """Whether any process got a signal: a collective when there are several processes (call it at the same
        step on every process), a plain read otherwise."""
        import jax

        if jax.process_count() == 1:
            return self.is_set()
        import numpy as np
        from jax.experimental import multihost_utils

        signums = multihost_utils.process_allgather(np.int32(self.received or 0))
        if self.received is None and np.any(signums):
            self.received = int(np.max(signums))   # act as the process that got it does
        return bool(np.any(signums))

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or 0)

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received else ""

    def clear(self) -> None:
        self.received = None

    def _handle(self, signum, frame) -> None:
        # A plain attribute store: safe in a signal handler (no locks, no I/O).
        self.received = signum

    def install(self) -> PreemptionFlag:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("install_preemption_handler() must be called from the main thread "
                               "(Python only delivers signals there)")
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            # None means the previous handler was not installed from Python; the default is the closest.
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def __enter__(self) -> PreemptionFlag:
        return self

    def __exit__(self, *exc) -> None:
        self.uninstall()


def install_preemption_handler(signals: tuple[int, ...] = DEFAULT_SIGNALS) -> PreemptionFlag:
    """Install a handler for `signals` (default SIGTERM and SIGINT) that only sets the returned flag."""
    return PreemptionFlag(tuple(signals)).install()
