"""shared/distributed.py: main_process_first builds on process 0 before the barrier, then on every process."""
import jax
from jax.experimental import multihost_utils

from shared.distributed import main_process_first


def test_one_process_builds_once_and_meets_no_barrier(monkeypatch):
    events = []
    monkeypatch.setattr(multihost_utils, "sync_global_devices", lambda name: events.append(("barrier", name)))
    assert main_process_first(lambda: events.append("build") or len(events), "ready") == 1
    assert events == ["build"]


def test_process_0_builds_before_the_barrier_and_every_process_after(monkeypatch):
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    for index, expected in ((0, ["build", ("barrier", "tok ready"), "build"]), (1, [("barrier", "tok ready"), "build"])):
        events = []
        monkeypatch.setattr(jax, "process_index", lambda index=index: index)
        monkeypatch.setattr(multihost_utils, "sync_global_devices", lambda name: events.append(("barrier", name)))
        assert main_process_first(lambda: events.append("build") or "tokenizer", "tok ready") == "tokenizer"
        assert events == expected, index
