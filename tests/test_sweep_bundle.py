"""A table carried across machines: shared.sweep --bundle / --from_bundle (shared/sweep/bundle.py).

The real launcher trains a tiny model: a stage (warm start) and two points that start from it. Lease 1 runs the
stage and point A, and point B is stopped mid-run (SIGTERM at step 4: it checkpoints); its bundle is unpacked on
"another machine" (a fresh folder at another path), where B resumes and finishes. The results equal a sweep that ran
uninterrupted, the stage ran once, and the bundle held only what the pending points needed: B's latest checkpoint
and the stage as its exported params, from which point C (not started on lease 1) warm-starts.
"""
import csv
import io
import json
import os
import tarfile
import textwrap

import pytest

from shared.sweep import run_sweep
from shared.sweep.bundle import BundleError, INDEX_FILE, read_index, unpack_bundle

TABLE = textwrap.dedent('''
    import os
    from experiments.quickstart import get_config as quickstart

    def get_config(arg=None):
        c = quickstart("smoke")
        c.mesh.preset = "cpu_1"
        c.train.sample_at_end = ""
        return c

    def get_sweep(arg=None):
        kill = {"train.kill_at_step": 4, "train.kill_signal": "TERM"} if os.environ.get("BUNDLE_TEST_KILL") else {}
        stage = {"name": "warm_s0", "overrides": {"seed": 0, "train.steps": 3}}
        start = {"seed": 0, "train.init_from": "run:{stage:warm_s0}", "optim.lr": 1e-3}
        return dict(name="bundle_test", stages=[stage],
                    points=[dict(name="A_s0", arm="A", overrides={**start, "optim.lr": 2e-3}),
                            dict(name="B_s0", arm="B", overrides={**start, **kill}),
                            dict(name="C_s0", arm="C", overrides={**start, "optim.lr": 3e-3})],
                    columns=["eval/loss", "train/loss"])
''')


def _rows(workdir):
    with open(os.path.join(workdir, "results.csv")) as f:
        return {r["name"]: (r["status"], r["eval/loss"], r["train/loss"]) for r in csv.DictReader(f)}


def _starts(run_dir):
    with open(os.path.join(run_dir, "launches.jsonl")) as f:
        return sum(json.loads(line)["event"] == "start" for line in f)


@pytest.fixture
def table(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    path = tmp_path / "bundle_table.py"
    path.write_text(TABLE)
    return str(path)


def test_a_table_stopped_on_one_machine_finishes_on_another_and_equals_an_uninterrupted_one(
        table, tmp_path, monkeypatch):
    reference = run_sweep(table, str(tmp_path / "uninterrupted"), parallel=2, echo=False)
    assert reference.ok

    monkeypatch.setenv("BUNDLE_TEST_KILL", "1")
    bundle = str(tmp_path / "out" / "table.tar.gz")
    first = run_sweep(table, str(tmp_path / "lease1"), parallel=2, echo=False, bundle=bundle, bundle_partial=True,
                      only=["A_s0", "B_s0"])
    assert first.outcomes["A_s0"].status == "finished" and first.outcomes["B_s0"].status == "failed"
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    index = read_index(bundle)
    assert index["checkpoints"] == ["warm_s0", "B_s0"]  # the stage B starts from, and B's own latest step
    assert not any(n.startswith("A_s0/checkpoints") for n in names)  # a finished point's checkpoints stay
    assert not any(n.startswith("stages/warm_s0/checkpoints") for n in names)  # the stage travels as params
    assert any(n.startswith("stages/warm_s0/params/") for n in names)
    steps = {n.split("/")[2] for n in names if n.startswith("B_s0/checkpoints/") and n.count("/") >= 3}
    kept = sorted(d for d in os.listdir(tmp_path / "lease1" / "B_s0" / "checkpoints") if d.isdigit())
    assert steps == {max(kept, key=int)}  # only the latest step travels
    assert "A_s0/summary.json" in names and "stages/warm_s0/launches.jsonl" in names

    monkeypatch.delenv("BUNDLE_TEST_KILL")
    second = run_sweep(table, str(tmp_path / "lease2"), parallel=2, echo=False, from_bundle=bundle)
    assert second.ok and sorted(second.launched) == ["B_s0", "C_s0"]  # the stage and A are not retrained
    assert _rows(str(tmp_path / "lease2")) == _rows(str(tmp_path / "uninterrupted"))
    assert _starts(str(tmp_path / "lease2" / "stages" / "warm_s0")) == 1
    assert _starts(str(tmp_path / "lease2" / "B_s0")) == 2  # killed at step 4 on lease 1, resumed on lease 2
    with open(tmp_path / "lease2" / "B_s0" / "log.txt") as f:
        assert "resum" in f.read().lower()
    manifest = json.load(open(tmp_path / "lease2" / "manifest.json"))
    assert len(manifest["leases"]) == 2 and manifest["leases"][0]["command_line"] != manifest["leases"][1]["command_line"]


def _tar_with(path, members: dict, index=None):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {INDEX_FILE: json.dumps(index or {"sweep": "bundle_test"}), **members}.items():
            info = tarfile.TarInfo(name)
            payload = data.encode()
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def test_unsafe_or_foreign_bundles_are_refused_before_anything_is_written(tmp_path):
    evil = str(tmp_path / "evil.tar.gz")
    _tar_with(evil, {"A_s0/summary.json": "{}", "../outside.txt": "x"})
    with pytest.raises(BundleError, match="unsafe member"):
        unpack_bundle(evil, str(tmp_path / "w"), "bundle_test")
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "w" / "A_s0").exists()

    absolute = str(tmp_path / "abs.tar.gz")
    _tar_with(absolute, {str(tmp_path / "abs_target.txt"): "x"})
    with pytest.raises(BundleError, match="unsafe member"):
        unpack_bundle(absolute, str(tmp_path / "w2"), "bundle_test")
    assert not (tmp_path / "abs_target.txt").exists()

    other = str(tmp_path / "other.tar.gz")
    _tar_with(other, {"A_s0/summary.json": "{}"}, index={"sweep": "another_table"})
    with pytest.raises(BundleError, match="holds sweep 'another_table'"):
        unpack_bundle(other, str(tmp_path / "w3"), "bundle_test")

    not_a_bundle = tmp_path / "plain.tar.gz"
    not_a_bundle.write_bytes(b"not a tar")
    with pytest.raises(BundleError, match="unreadable"):
        unpack_bundle(str(not_a_bundle), str(tmp_path / "w4"), "bundle_test")


def test_links_oversized_and_overlong_bundles_are_refused(tmp_path, monkeypatch):
    from shared.sweep import bundle as bundle_mod

    linked = str(tmp_path / "linked.tar.gz")
    with tarfile.open(linked, "w:gz") as tar:
        for name, payload in {"bundle.json": json.dumps({"sweep": "bundle_test"}), "A_s0/summary.json": "{}"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload.encode()))
        link = tarfile.TarInfo("A_s0/inside_link")      # a link that points inside is refused too: none of ours has one
        link.type, link.linkname = tarfile.SYMTYPE, "summary.json"
        tar.addfile(link)
    with pytest.raises(BundleError, match="'A_s0/inside_link' is a link"):
        unpack_bundle(linked, str(tmp_path / "w"), "bundle_test")
    assert not (tmp_path / "w" / "A_s0").exists()     # nothing written before every member was checked

    ok = str(tmp_path / "ok.tar.gz")
    _tar_with(ok, {"A_s0/summary.json": "{}", "A_s0/metrics.jsonl": "{}\n"})
    monkeypatch.setattr(bundle_mod, "MAX_MEMBERS", 2)
    with pytest.raises(BundleError, match="more than 2 members"):
        unpack_bundle(ok, str(tmp_path / "w2"), "bundle_test")
    monkeypatch.setattr(bundle_mod, "MAX_MEMBERS", 100)
    monkeypatch.setattr(bundle_mod, "FREE_DISK_MARGIN_BYTES", 1 << 60)   # as if the disk were full
    with pytest.raises(BundleError, match="GiB free under"):
        unpack_bundle(ok, str(tmp_path / "w3"), "bundle_test")
    monkeypatch.setattr(bundle_mod, "FREE_DISK_MARGIN_BYTES", 0)
    unpack_bundle(ok, str(tmp_path / "w4"), "bundle_test")
    assert (tmp_path / "w4" / "A_s0" / "metrics.jsonl").read_text() == "{}\n"

    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "w5").mkdir()
    os.symlink(outside, tmp_path / "w5" / "A_s0")      # a link already in the workdir is not followed out
    with pytest.raises(BundleError, match="would land outside"):
        unpack_bundle(ok, str(tmp_path / "w5"), "bundle_test")
    deeper = str(tmp_path / "deeper.tar.gz")          # not even an empty folder is made through it
    _tar_with(deeper, {"A_s0/sub/summary.json": "{}"})
    with pytest.raises(BundleError, match="would land outside"):
        unpack_bundle(deeper, str(tmp_path / "w5"), "bundle_test")
    assert not list(outside.iterdir())


def test_parts_join_back_and_points_finished_here_are_kept(tmp_path):
    from shared.sweep.bundle import write_bundle
    from shared.sweep.table import Point

    src = tmp_path / "src"
    (src / "A_s0").mkdir(parents=True)
    (src / "A_s0" / "summary.json").write_text('{"v": "from the bundle"}')
    (src / "A_s0" / "blob.bin").write_bytes(os.urandom(300_000))  # incompressible: several parts
    points = [Point("A_s0", {}, None, (), "A")]
    written = write_bundle(str(tmp_path / "b.tar.gz"), str(src), "bundle_test", points,
                           {"A_s0": str(src / "A_s0")}, {"A_s0": True}, part_mb=0.1)
    assert len(written["files"]) >= 3 and all(".part" in f for f in written["files"])
    assert not (tmp_path / "b.tar.gz").exists()

    here = tmp_path / "here"
    (here / "A_s0").mkdir(parents=True)
    (here / "A_s0" / "summary.json").write_text('{"v": "finished here"}')
    unpack_bundle(str(tmp_path / "b.tar.gz"), str(here), "bundle_test", finished_here=["A_s0"])
    assert json.loads((here / "A_s0" / "summary.json").read_text())["v"] == "finished here"
    fresh = tmp_path / "fresh"
    unpack_bundle(str(tmp_path / "b.tar.gz"), str(fresh), "bundle_test")
    assert (fresh / "A_s0" / "blob.bin").read_bytes() == (src / "A_s0" / "blob.bin").read_bytes()
