"""projects/gap/prefetch.py: the prefetched train stream (2 spawned workers) equals the serial one batch for batch
(stage A and stage B data), set_state restarts it at the given step, and close() leaves no worker process.
Tiny batches on procedural glyphs; the workers start once per test (about 2 s: each imports numpy and gridops)."""
import multiprocessing
import pickle

import numpy as np
import pytest

from experiments.gap.train import get_config
from projects.gap import gridops
from projects.gap.prefetch import Prefetched, prefetched, usable_cpus
from projects.gap.task import BATCH_KEYS, StageAData, StageBData, check_options, train_data

STEPS = 5


@pytest.fixture(scope="module")
def pools():
    return gridops.synthetic_pools(0, 10)


def stage_a(pools):
    return StageAData(get_config("smoke").gap, pools, 3, 4)


def stage_b(pools):
    o = get_config("smoke_G").gap
    assigned = np.arange(6) % 2 == 0          # 6 pool rows, batch 4: the epochs turn over inside the stream
    return StageBData(o, pools, 3, 4, assigned)


def assert_same(got: dict, want: dict, what: str):
    assert sorted(got) == sorted(want), what
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=f"{what}: {key}")


def children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children()}


@pytest.mark.parametrize("make", [stage_a, stage_b], ids=["stage_a", "stage_b"])
def test_prefetched_stream_equals_serial_and_restarts_at_set_state(pools, make):
    serial = [next(it) for it in [make(pools)] for _ in range(STEPS)]
    before = children()
    with Prefetched(make(pools), workers=2) as data:
        for step, want in enumerate(serial):
            assert data.get_state() == {"step": step}
            assert_same(next(data), want, f"step {step}")
        assert data.get_state() == {"step": STEPS}
        data.set_state({"step": 3})               # drops the batches in flight (steps 5 .. 8)
        assert data.get_state() == {"step": 3}
        assert_same(next(data), serial[3], "step 3 after set_state")
        assert data.get_state() == {"step": 4}
        workers = children() - before
        assert len(workers) == 2
    assert not workers & children(), "close() left worker processes"


def test_set_state_before_the_first_batch_and_a_resumed_maker(pools):
    serial = [next(it) for it in [stage_b(pools)] for _ in range(STEPS)]
    data = Prefetched(stage_b(pools), workers=2, ahead=1)
    data.set_state({"step": 3})                   # as Trainer.fit does on a resumed run
    assert_same(next(data), serial[3], "step 3")
    assert_same(next(data), serial[4], "step 4")
    data.close()
    data.close()                                  # idempotent
    with pytest.raises(ValueError, match="closed"):
        next(data)
    maker = stage_a(pools)
    maker.set_state({"step": 2})
    resumed = Prefetched(maker, workers=1)
    assert resumed.get_state() == {"step": 2}     # starts where the maker is
    resumed.close()                               # never started: nothing to stop


def test_makers_pickle_and_stage_a_has_no_aux_image(pools):
    a, b = stage_a(pools), stage_b(pools)
    for maker in (a, b):
        copy = pickle.loads(pickle.dumps(maker))
        assert_same(copy.batch_at(7), maker.batch_at(7), type(maker).__name__)
    assert "aux_image" not in a.batch_at(0)       # stage A's loss never reads it (mode none)
    assert set(b.batch_at(0)) == set(BATCH_KEYS)  # G: the latent loss's targets v*


def test_workers_option():
    o = get_config("smoke").gap
    assert o.prefetch_workers == 0                # CI: serial, no worker start-up
    assert train_data(stage_a(gridops.synthetic_pools(0, 10)), o).__class__ is StageAData
    full = train_data(stage_a(gridops.synthetic_pools(0, 10)), get_config("a").gap)
    assert isinstance(full, Prefetched) and 1 <= full.workers <= min(8, usable_cpus())
    full.close()                                  # never started: no process to stop
    o.prefetch_workers = -1
    with pytest.raises(ValueError, match="gap.prefetch_workers"):
        check_options(o)
    with pytest.raises(ValueError, match="workers"):
        prefetched(object(), -1)
