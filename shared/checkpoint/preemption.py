"""SIGTERM (TPU/GCE preemption, SLURM, Kubernetes) -> a flag the training loop polls.

The handler only records the signal: saving from inside a signal handler could interrupt an
orbax/jax call mid-way. The trainer checks `flag.is_set()` once per step, saves with `force=True`,
waits for the save and exits cleanly.

Multi-host: each process sees its own signal, possibly at different steps; before acting on the
flag, all processes must agree on a step (e.g. `jax.experimental.multihost_utils.
reached_preemption_sync_point(step)` or an all-reduce of the flag), otherwise the collective save
deadlocks.
"""
from __future__ import annotations

import signal
import threading


class PreemptionFlag:
    """Set by the installed signal handler; `uninstall()` puts the previous handlers back."""

    def __init__(self, signals: tuple[int, ...]):
        self.signals = signals
        self.received: int | None = None  # the signal number that set the flag
        self._previous: dict[int, object] = {}

    def is_set(self) -> bool:
        return self.received is not None

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


def install_preemption_handler(signals: tuple[int, ...] = (signal.SIGTERM,)) -> PreemptionFlag:
    """Install a handler for `signals` (default SIGTERM) that only sets the returned flag."""
    return PreemptionFlag(tuple(signals)).install()
