"""Train batches computed ahead of time in worker processes, in step order, equal to the serial stream.

    data = Prefetched(StageAData(...), workers=8)    # or prefetched(data, workers): the data itself when workers = 0
    batch = next(data)                               # = the serial iterator's batch of the same step
    data.get_state() / data.set_state({"step": s})   # as the serial iterator's (shared.train.Trainer.fit)
    data.close()                                     # also on garbage collection and at interpreter exit

The wrapped object (the "maker") needs `batch_at(step) -> dict` (a pure function of its fields and the step), a
`step` attribute (where the stream starts) and must pickle: it is sent once to each worker (the pool's
initializer, as bytes), after which only step numbers go out and batches come back. Workers are started with the
'spawn' context (the parent has JAX initialised; forking it is unsafe) on the first next(), so, as with any spawn
pool, the program's main module must be safe to import (`if __name__ == "__main__":`; shared.launch and pytest
are). The pool keeps `ahead` futures submitted (steps s .. s+ahead-1) and hands their results back in order.
set_state drops the work in flight (cancelled, or finished and discarded) and refills from the new step; the
workers stay up. A worker takes about 2 s to start (it imports gridops, which imports jax through shared.data).

Why not grain's mp_prefetch (shared.data.pipeline uses grain for the LM data): a GAP batch is a pure function of
the step, so a pool map over step numbers with a bounded window is all that is needed. grain.MapDataset.range(s,
big).map(fn).to_iter_dataset().mp_prefetch(...) takes the same picklable function, but its state is per worker
slice, so set_state to an arbitrary step means rebuilding the pipeline (respawning every worker) behind a {"step"}
wrapper anyway; it also wants absl flags parsed before its first batch, hands back its own SharedMemoryArray type
instead of plain arrays, and was slower here (2 CPUs, batch 256: 12 batches/s with 2 workers against 20).
A worker also ends itself when its parent is gone (a parent killed by SIGKILL never shuts the pool down, and the
pool's queues alone would keep its workers waiting).
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import multiprocessing
import os
import pickle
import threading
import time
import weakref

_MAKER = None   # a worker's copy of the maker (set by _init_worker)


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one; a container's limit shows there)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _watch_parent(parent_pid: int, interval: float = 1.0) -> None:
    """Ends this worker once its parent is gone (a parent killed by SIGKILL never shuts the pool down)."""
    while True:
        time.sleep(interval)
        if os.getppid() != parent_pid:
            os._exit(0)


def _init_worker(pickled_maker: bytes, parent_pid: int) -> None:
    global _MAKER
    _MAKER = pickle.loads(pickled_maker)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="prefetch-parent-watch").start()


def _batch_at(step: int) -> dict:
    return _MAKER.batch_at(step)


def _shutdown(pool: cf.ProcessPoolExecutor) -> None:
    """Stops the pool and joins its processes (a running batch finishes first: tens of ms)."""
    pool.shutdown(wait=True, cancel_futures=True)


class Prefetched:
    """The maker's batches of steps maker.step, maker.step + 1, ... from `workers` spawned processes, `ahead`
    steps (default 2 x workers) in flight. The same iterator protocol and state as the maker."""

    def __init__(self, maker, workers: int, ahead: int | None = None):
        if int(workers) < 1:
            raise ValueError(f"Prefetched: workers={workers} (>= 1; use the maker itself for serial batches)")
        self.maker, self.workers = maker, int(workers)
        self.ahead = int(ahead) if ahead is not None else 2 * self.workers
        if self.ahead < 1:
            raise ValueError(f"Prefetched: ahead={ahead} (>= 1)")
        self.step = int(maker.step)
        self._pending: collections.deque = collections.deque()   # futures of steps self.step, self.step + 1, ...
        self._pool: cf.ProcessPoolExecutor | None = None
        self._finalizer = None
        self._closed = False

    def _start(self) -> None:
        if self._closed:
            raise ValueError("Prefetched: the iterator is closed")
        # the maker goes out as bytes: a spawned child reads its start-up arguments from a pipe the parent writes
        # while it blocks, and unpickling the maker there would import its module (jax, ~1.5 s) mid-read, one
        # worker after the other; as bytes, the import happens in the initializer, in every worker at once
        self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_init_worker,
                                            initargs=(pickle.dumps(self.maker, protocol=5), os.getpid()))
        # runs on close(), when this object is collected, or at interpreter exit, whichever comes first (the
        # callback holds the pool, not self)
        self._finalizer = weakref.finalize(self, _shutdown, self._pool)

    def _fill(self) -> None:
        while len(self._pending) < self.ahead:
            self._pending.append(self._pool.submit(_batch_at, self.step + len(self._pending)))

    def _drop_pending(self) -> None:
        for future in self._pending:
            future.cancel()   # not yet started: never runs; running: its result is discarded
        self._pending.clear()

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        if self._closed:
            raise ValueError("Prefetched: the iterator is closed")
        if self._pool is None:
            self._start()
        self._fill()
        batch = self._pending.popleft().result()
        self.step += 1
        self._fill()
        return batch

    def get_state(self) -> dict:
        return {"step": self.step}

    def set_state(self, state) -> None:
        self._drop_pending()
        self.step = int(state["step"])

    def close(self) -> None:
        """Stops and joins the workers; idempotent."""
        self._closed = True
        self._drop_pending()
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def prefetched(maker, workers: int, ahead: int | None = None):
    """maker itself when workers is 0 (serial, no processes), else Prefetched(maker, workers, ahead)."""
    if int(workers) < 0:
        raise ValueError(f"prefetched: workers={workers} (>= 0)")
    return maker if int(workers) == 0 else Prefetched(maker, workers, ahead)
