"""SIGTERM / SIGINT outside the training loops -> one line and exit 128 + signal, never a traceback.

The loops (Trainer.fit, RLLearner.fit) install their own flag (shared.checkpoint.preemption) and save before
exiting; anywhere else in a launch (setup, the final evaluation or sample) the last checkpoint is complete and
a re-run resumes, so the launcher only has to stop cleanly. Kept apart from shared.checkpoint so the launcher
can install it before jax is imported.
"""
from __future__ import annotations

import contextlib
import signal
import threading

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """A signal arrived outside a training loop (BaseException, like KeyboardInterrupt: no `except Exception`
    swallows it). exit_code = 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


@contextlib.contextmanager
def raise_on_signals(signals: tuple[int, ...] = SIGNALS):
    """While inside, the signals raise Interrupted in the main thread (a no-op in other threads)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum, frame):
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, handle) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
