"""Counts of XLA compilations in this process, from jax's monitoring events (not timing).

    counts = compile_counts()            # installs the listeners on first use
    ... run something ...
    compile_counts() - counts            # CompileCounts(compiles=..., cache_hits=..., cache_misses=...)

compiles: every program jax handed to the backend (jit, AOT `.lower().compile()` and the small programs of eager
ops alike), including those then served by the persistent compilation cache; cache_hits / cache_misses: the
persistent cache's answers (both 0 while it is off). A program found in jax's in-memory caches counts nothing.
"""
from __future__ import annotations

import dataclasses
import threading

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"   # jax._src.dispatch.BACKEND_COMPILE_EVENT
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_MISS_EVENT = "/jax/compilation_cache/cache_misses"


@dataclasses.dataclass(frozen=True)
class CompileCounts:
    compiles: int = 0
    cache_hits: int = 0
    cache_misses: int = 0

    def __sub__(self, other: "CompileCounts") -> "CompileCounts":
        return CompileCounts(*(a - b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))


_counts = {"compiles": 0, "cache_hits": 0, "cache_misses": 0}
_lock = threading.Lock()
_installed = False


def _on_event(name: str, *args, **kwargs) -> None:
    key = {CACHE_HIT_EVENT: "cache_hits", CACHE_MISS_EVENT: "cache_misses"}.get(name)
    if key:
        with _lock:
            _counts[key] += 1


def _on_duration(name: str, *args, **kwargs) -> None:
    if name == COMPILE_EVENT:
        with _lock:
            _counts["compiles"] += 1


def install() -> None:
    """Registers the listeners (once per process; jax keeps them for its lifetime)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    from jax import monitoring

    monitoring.register_event_listener(_on_event)
    monitoring.register_event_duration_secs_listener(_on_duration)


def compile_counts() -> CompileCounts:
    """The counts since the listeners were installed (installing them now if they were not)."""
    install()
    with _lock:
        return CompileCounts(**_counts)
