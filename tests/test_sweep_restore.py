"""A committed table continued (--from_results) and points run again (--rerun): shared/sweep/restore.py, against the
fake launcher of test_sweep.py (eval/loss = lr * 10 + seed / 100 + 1 / steps; a stage with fail=True exits 3)."""
import csv
import json
import os
import shutil

import pytest

from shared.sweep import restore, run_sweep
from test_sweep import setup  # noqa: F401  (the fixture: table file, fake launcher, launch marker)



def sweep(setup, table, workdir, **kwargs):  # noqa: F811
    return run_sweep(table, workdir, launcher_cmd=setup["launcher"], echo=False,
                     extra_overrides=["--config.train.steps=3"], **kwargs)


def rows(workdir):
    with open(os.path.join(workdir, "results.csv")) as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def committed(workdir, folder):
    """What the repo commits of a sweep: its tables and manifest, nothing of the workdir's run folders."""
    os.makedirs(folder)
    for name in ("results.csv", "results.md", "manifest.json"):
        shutil.copy(os.path.join(workdir, name), folder)
    return folder


def test_a_committed_partial_table_finishes_without_rerunning_its_finished_points(setup, tmp_path):  # noqa: F811
    table = setup["table"]("bars")
    first = sweep(setup, table, setup["workdir"], only=["lr0.1_s0", "lr0.2_s0", "lr0.1_s1"])
    assert first.ok and len(setup["launches"]()) == 3
    results = committed(setup["workdir"], str(tmp_path / "repo_results"))
    shutil.rmtree(setup["workdir"])  # the machine is gone

    workdir = str(tmp_path / "next_machine")
    second = sweep(setup, table, workdir, from_results=results)
    assert second.ok and sorted(second.launched) == ["lr0.1_s2", "lr0.2_s1", "lr0.2_s2"]
    assert len(setup["launches"]()) == 6  # the three finished points were not launched again
    table_rows = rows(workdir)
    assert all(r["status"] == "finished" for r in table_rows.values())
    for name in ("lr0.1_s0", "lr0.2_s0", "lr0.1_s1"):  # restored values are the committed ones, to the digit
        assert table_rows[name]["eval/loss"] == rows(results)[name]["eval/loss"]
    manifest = json.load(open(os.path.join(workdir, "manifest.json")))
    assert len(manifest["leases"]) == 2
    assert manifest["points"]["lr0.1_s0"]["launches"][0]["launch_id"] == \
        json.load(open(os.path.join(results, "manifest.json")))["points"]["lr0.1_s0"]["launches"][0]["launch_id"]


def test_rerun_of_a_stage_reruns_every_point_of_that_seed_and_nothing_else(setup, tmp_path):  # noqa: F811
    spec = setup["table"]("bars") + ":with_stages"  # one stage per seed; seed 2's fails
    first = sweep(setup, spec, setup["workdir"])
    assert first.outcomes["sft_s2"].status == "failed" and first.outcomes["lr0.1_s2"].status == "not run"
    results = committed(setup["workdir"], str(tmp_path / "repo_results"))
    before = len(setup["launches"]())

    workdir = str(tmp_path / "next_machine")
    with pytest.raises(ValueError, match="'sft_s9' names no stage or point"):
        sweep(setup, spec, workdir, from_results=results, rerun="sft_s9")
    dry = sweep(setup, spec, workdir, from_results=results, rerun="sft_s1", dry_run=True)
    # seed 0: its points restored, its stage's records kept (no point still needs the stage)
    assert {n for n, o in dry.outcomes.items() if o.status == "skipped"} == {"sft_s0", "lr0.1_s0", "lr0.2_s0"}
    assert not os.path.exists(workdir)  # a dry run writes nothing
    # seed 1's stage again (in the real case: lost with the machine), so both of seed 1's arms run again with it;
    # seed 0 stays restored, seed 2's stage still fails
    again = sweep(setup, spec, workdir, from_results=results, rerun="sft_s1")
    launched = [line.split()[0] for line in setup["launches"]()[before:]]
    assert sorted(launched) == ["lr0.1_s1", "lr0.2_s1", "sft_s1", "sft_s2"]
    assert again.outcomes["lr0.1_s0"].status == "skipped" and again.outcomes["lr0.1_s1"].status == "finished"
    old, new = (json.load(open(os.path.join(d, "manifest.json")))["stages"] for d in (results, workdir))
    # seed 0's stage did not run again: its launch record and summary stay in the table's manifest
    assert new["sft_s0"]["launches"] == old["sft_s0"]["launches"]
    assert new["sft_s0"]["summary"] == old["sft_s0"]["summary"]
    assert len(new["sft_s1"]["launches"]) == 1 and new["sft_s1"]["launches"] != old["sft_s1"]["launches"]


def test_a_manifest_of_another_table_or_of_changed_points_is_refused(setup, tmp_path, monkeypatch):  # noqa: F811
    table = setup["table"]("bars")
    sweep(setup, table, setup["workdir"], only=["lr0.1_s0"])
    results = committed(setup["workdir"], str(tmp_path / "repo_results"))
    with pytest.raises(ValueError, match="is the table 'lr_table' .*variant None.*not 'lr_table' .*'with_stages'"):
        sweep(setup, table + ":with_stages", str(tmp_path / "w1"), from_results=results)
    path = os.path.join(results, "manifest.json")
    manifest = json.load(open(path))
    manifest["points"]["lr0.1_s0"]["overrides"]["optim.lr"] = 0.3
    json.dump(manifest, open(path, "w"))
    with pytest.raises(ValueError, match="point 'lr0.1_s0' ran with overrides"):
        sweep(setup, table, str(tmp_path / "w2"), from_results=results)
    # as the message says: running that point again takes the rest of the table as committed
    assert sweep(setup, table, str(tmp_path / "w2"), from_results=results, rerun="lr0.1_s0").ok
    with monkeypatch.context() as patch, pytest.raises(ValueError, match="over the 0.0001 MiB a sweep manifest"):
        patch.setattr(restore, "MAX_MANIFEST_MB", 1e-4)  # a results folder from someone else: limits first
        sweep(setup, table, str(tmp_path / "w4"), from_results=results)
    with pytest.raises(ValueError, match="no manifest.json there"):
        sweep(setup, table, str(tmp_path / "w3"), from_results=str(tmp_path / "nowhere"))
