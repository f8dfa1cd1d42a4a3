"""shared.sweep.campaign: experiments/CAMPAIGN.md is generated from experiments/campaign.py and kept current."""
import json
import subprocess
import os

import pytest

from shared.sweep import campaign, runner

from conftest import REPO_ROOT

CAMPAIGN = os.path.join(REPO_ROOT, "experiments", "campaign.py")
MARKDOWN = os.path.join(REPO_ROOT, "experiments", "CAMPAIGN.md")


def test_campaign_md_is_current():
    with open(MARKDOWN, encoding="utf-8") as f:
        text = f.read()
    assert campaign.render(campaign.load_entries(CAMPAIGN)) in text, (
        "experiments/CAMPAIGN.md is stale: python -m shared.sweep.campaign --campaign=experiments/campaign.py --write")


def test_every_entry_names_a_sweep_file_and_done_entries_have_their_manifest():
    for entry in campaign.load_entries(CAMPAIGN):
        config_file = entry["config"].split(":")[0]
        if entry["state"] == "ready":
            assert os.path.exists(os.path.join(REPO_ROOT, config_file)), entry["name"]
        record = campaign.done_record(entry)
        if record is not None:
            assert record["wall_min"] >= 0 and record["date"].startswith("20"), entry["name"]


def _entries_file(tmp_path, entries):
    path = tmp_path / "c.py"
    path.write_text(f"ENTRIES = {entries!r}\n")
    return str(path)


def _entry(name, state="ready", results="r", parallel=2):
    return dict(name=name, config="experiments/quickstart.py:smoke", results=results, parallel=parallel,
                est_gpu_min=1, est_wall_min=1, state=state)


def test_bad_entries_and_states_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"lacks \['results'"):
        campaign.load_entries(_entries_file(tmp_path, [dict(name="a", config="x.py")]))
    with pytest.raises(ValueError, match="duplicate name 'a'"):
        campaign.load_entries(_entries_file(tmp_path, [_entry("a"), _entry("a")]))
    with pytest.raises(ValueError, match="state must be 'ready' or 'needs ...'"):
        campaign.load_entries(_entries_file(tmp_path, [_entry("a", state="blocked")]))


def test_next_ready_tables_skip_done_and_unready_ones_and_continue_from_their_bundles(tmp_path):
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "manifest.json").write_text(json.dumps(
        {"sweep": "x", "end_time": "2026-11-27T01:00:00+00:00", "wall_time_s": 120,
         "source": {"commit": "abcdef0123", "hash": "h"}, "hardware": {"gpus": ["NVIDIA H200"]}}))
    entries = [_entry("finished", results="done"), _entry("blocked", state="needs a fix: x"), _entry("a"), _entry("b")]
    chosen = campaign.choose(entries, None, 1, root=str(tmp_path))
    assert [e["name"] for e in chosen] == ["a"]
    assert "done (2026-11-27, commit abcdef0, 1 x NVIDIA H200, 2.0 min wall" in campaign.status(entries[0], str(tmp_path))
    with pytest.raises(ValueError, match="unknown table"):
        campaign.choose(entries, ["nope"], None)
    bundles = tmp_path / "bundles"
    command = campaign.sweep_command(entries[2], str(tmp_path / "w"), str(bundles), 540, 15)
    assert not any(c.startswith("--from_bundle") for c in command) and "--time_budget_s=540" in command
    assert "--finish_in_budget" not in command
    assert "--finish_in_budget" in campaign.sweep_command(entries[2], str(tmp_path / "w"), str(bundles), 540, None,
                                                          finish_in_budget=True)
    bundles.mkdir()
    (bundles / "a.tar.gz.part000").write_bytes(b"")
    command = campaign.sweep_command(entries[2], str(tmp_path / "w"), str(bundles), None, None)
    assert f"--from_bundle={bundles / 'a.tar.gz'}" in command and f"--bundle={bundles / 'a.tar.gz'}" in command


def test_a_table_a_lease_cut_short_is_partial_and_still_chosen(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "manifest.json").write_text(json.dumps(
        {"sweep": "x", "end_time": "2026-11-28T01:00:00+00:00", "wall_time_s": 60, "source": {"commit": "abcdef0123"},
         "points": {"R1_s0": {"status": "finished"}, "R3_s0": {"status": "not run"}}}))
    entries = [_entry("half", results="half"), _entry("b")]
    assert campaign.status(entries[0], str(tmp_path)).startswith("partial: 1 of 2 points (2026-11-28, commit abcdef0")
    assert not campaign.is_done(entries[0], str(tmp_path))
    # on the next machine it goes on from the committed files: finished points restored, a lost seed run again
    command = campaign.sweep_command({**entries[0], "rerun": "warm_s1"}, str(tmp_path / "w"), str(tmp_path / "b"),
                                     540, None, root=str(tmp_path))
    assert f"--from_results={tmp_path / 'half'}" in command and "--rerun=warm_s1" in command
    assert not any(c.startswith("--from_results") for c in campaign.sweep_command(
        entries[1], str(tmp_path / "w"), str(tmp_path / "b"), 540, None, root=str(tmp_path)))
    assert [e["name"] for e in campaign.choose(entries, None, 1, root=str(tmp_path))] == ["half"]
    assert "Pending: 2 table(s)" in campaign.render(entries, str(tmp_path))


def test_concurrent_tables_get_disjoint_gpu_blocks_in_proportion_to_parallel(tmp_path, monkeypatch):
    gpus = ["0", "1", "2", "3"]
    assert campaign.gpu_blocks(gpus, [6, 9]) == ["0,1", "2,3"]
    assert campaign.gpu_blocks(gpus, [6, 9, 6]) == ["0", "1,2", "3"]
    assert campaign.gpu_blocks(gpus, [16, 1]) == ["0,1,2", "3"]
    assert campaign.gpu_blocks(gpus, [1, 1, 1, 1, 1]) == ["0", "1", "2", "3", "0"]   # more tables than GPUs
    assert campaign.gpu_blocks(["0"], [6, 9]) == [None, None] and campaign.gpu_blocks(gpus, [6]) == [None]
    for weights in ([1, 2], [3, 3, 3], [5, 1, 1, 9]):
        blocks = campaign.gpu_blocks(gpus, weights)
        used = [g for b in blocks for g in b.split(",")]
        assert sorted(used) == gpus and all(blocks)   # every GPU once, none empty

    launched = []

    class FakeProc:
        returncode = 0

        def __init__(self, command, env, **_):
            launched.append((command[command.index("-m") + 2], env.get("CUDA_VISIBLE_DEVICES"),
                             env.get(runner.COTENANTS_ENV)))

        def poll(self):
            return 0

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(campaign.subprocess, "Popen", FakeProc)
    codes = campaign.run([_entry("a", parallel=6), _entry("b", parallel=9)], str(tmp_path / "w"), str(tmp_path / "b"),
                         None)
    assert codes == {"a": 0, "b": 0}
    assert [gpus for _, gpus, _ in launched] == ["0,1", "2,3"]
    assert [cotenants for _, _, cotenants in launched] == [None, None]   # disjoint blocks: nobody shares

    # one GPU, two tables: both sweeps are told that another table's points share it (runner.COTENANTS_ENV)
    launched.clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    campaign.run([_entry("a", parallel=6), _entry("b", parallel=9)], str(tmp_path / "w"), str(tmp_path / "b"), None)
    assert [(gpus, cotenants) for _, gpus, cotenants in launched] == [("0", "1"), ("0", "1")]
    launched.clear()
    campaign.run([_entry("a", parallel=6)], str(tmp_path / "w"), str(tmp_path / "b"), None)
    assert [(gpus, cotenants) for _, gpus, cotenants in launched] == [("0", None)]   # a table alone on its GPU


def test_tables_that_share_a_gpu_are_found_from_their_blocks():
    assert campaign.shares_a_gpu([None, None]) == [True, True]           # fewer than two GPUs: all on the one
    assert campaign.shares_a_gpu([None]) == [False]
    assert campaign.shares_a_gpu(["0,1", "2,3"]) == [False, False]
    assert campaign.shares_a_gpu(["0", "1", "2", "3", "0"]) == [True, False, False, False, True]
    assert campaign.shares_a_gpu(["0,1", "1,2", "3"]) == [True, True, False]


def test_gpu_names_are_those_the_process_was_given(monkeypatch):
    """The manifest's hardware names the GPUs of the sweep's block (CUDA_VISIBLE_DEVICES), not every GPU of the host."""
    from shared.sweep import hardware

    listing = "".join(f"GPU {i}: NVIDIA H{100 + i} (UUID: GPU-{i})\n" for i in range(4))
    monkeypatch.setattr(hardware.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=listing, stderr=""))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert hardware.gpu_names() == ["NVIDIA H100", "NVIDIA H101", "NVIDIA H102", "NVIDIA H103"]
    assert hardware.visible_gpus() == ["0", "1", "2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert hardware.gpu_names() == ["NVIDIA H102", "NVIDIA H103"] and hardware.visible_gpus() == ["2", "3"]


def test_results_are_packed_small_and_large_bundles_stay_on_the_machine(tmp_path):
    import tarfile

    work, bundles, out = tmp_path / "w", tmp_path / "b", tmp_path / "out"
    (work / "a" / "point" / "checkpoints").mkdir(parents=True)
    (work / "a" / "results.csv").write_text("name,x\np,1\n")
    (work / "a" / "manifest.json").write_text("{}")
    (work / "a" / "point" / "checkpoints" / "big").write_bytes(b"0" * 1000)
    (work / "b").mkdir()
    entries = [_entry("a"), _entry("b"), _entry("never_ran")]
    paths = campaign.pack_results(entries, str(work), str(out))
    assert [os.path.basename(p) for p in paths] == ["a.results.tar.gz", "b.results.tar.gz"]
    with tarfile.open(paths[0]) as tar:
        assert sorted(tar.getnames()) == ["manifest.json", "results.csv"]   # top-level files only, no checkpoints

    bundles.mkdir()
    for part in ("a.tar.gz.part000", "a.tar.gz.part001"):
        (bundles / part).write_bytes(b"0" * 2**20)          # 2 MiB in all: over the 1.5 MiB budget alone
    (bundles / "b.tar.gz").write_bytes(b"0" * 2**19)        # 0.5 MiB: fits
    (bundles / "c.tar.gz").write_bytes(b"0" * 2**20)        # 1 MiB: fits beside b (1.5 in all)
    (bundles / "d.tar.gz").write_bytes(b"0" * 2**18)        # 0.25 MiB: the budget is spent
    entries = [_entry("a"), _entry("b"), _entry("c"), _entry("d"), _entry("never_ran")]
    held = campaign.hold_bundles_over_budget(entries, str(work), str(bundles), 1.5)
    assert held == {"a": 2.0, "d": 0.25}
    assert sorted(os.listdir(bundles)) == ["b.tar.gz", "c.tar.gz"]
    assert sorted(os.listdir(work / "a.bundle")) == ["a.tar.gz.part000", "a.tar.gz.part001"]
    assert sorted(os.listdir(work / "d.bundle")) == ["d.tar.gz"]


def test_no_table_named_prints_where_the_campaign_stands_and_a_gpu_table_needs_a_gpu(tmp_path, monkeypatch, capsys):
    def no_run(*args, **kwargs):
        raise AssertionError("nothing may run")

    monkeypatch.setattr(campaign, "run", no_run)
    gpu, cpu = _entry("gpu_table"), dict(_entry("cpu_table"), est_gpu_min=0)
    path = _entries_file(tmp_path, [gpu, cpu])
    assert campaign.main([f"--campaign={path}"]) == 0
    out = capsys.readouterr().out
    assert "2 tables: 0 done, 2 pending" in out and "gpu_table" in out and f"--campaign={path} --next=2" in out
    # one GPU you keep: the first ready table's own sweep command and where its files go
    assert ("the first one:  python -m shared.sweep --config=experiments/quickstart.py:smoke "
            "--workdir=runs/gpu_table --parallel=2") in out and "from runs/gpu_table/ into r/" in out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert campaign.main([f"--campaign={path}", "--next=1"]) == 2
    assert "gpu_table: estimated in GPU-minutes, and no GPU is visible" in capsys.readouterr().err
    ran = []
    monkeypatch.setattr(campaign, "run", lambda chosen, *a, **k: ran.extend(e["name"] for e in chosen) or {})
    assert campaign.main([f"--campaign={path}", "--run=cpu_table"]) == 0 and ran == ["cpu_table"]
