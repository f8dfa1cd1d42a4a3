"""Multi-process helpers at the bottom of the library: they import jax and nothing of shared.

  main_process_first(build, barrier)   process 0 builds first (e.g. trains and caches a tokenizer), then every
                                       process builds (loading what process 0 cached)
"""
from __future__ import annotations

from typing import Callable, TypeVar

import jax

T = TypeVar("T")


def main_process_first(build: Callable[[], T], barrier: str) -> T:
    """build() on every process, process 0 first.

    On a multi-process run process 0 calls build() (which writes its cache, e.g. a trained sentencepiece model),
    then all processes meet at the barrier named `barrier` (the same name on every process), then every process
    calls build() and gets the cached result. On one process: build() once."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        if jax.process_index() == 0:
            build()
        multihost_utils.sync_global_devices(barrier)
    return build()
