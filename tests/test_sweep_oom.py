"""shared.sweep requeues a point that ran out of GPU memory beside other points on its GPU, with one point fewer on
that GPU from then on; fake points (a stdlib script) stand in for JAX, fake GPUs are CUDA_VISIBLE_DEVICES ids."""
import json
import os
import sys
import textwrap

import pytest
from test_sweep import read_csv, setup  # noqa: F401 (setup: the fixture, reused)

from shared.sweep import run_sweep, runner

OOM_LINE = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate 16.00GiB: "
            "CUDA_ERROR_OUT_OF_MEMORY: out of memory")

# A point's fate by its "mode" (each point holds a file in FAKE_GPU_DIR/<CUDA_VISIBLE_DEVICES>/ while it runs):
# fits_alone, at its first launch, waits for a sibling on its GPU, and once both have seen each other (a <name>.saw
# file each: no timing race on a loaded machine) runs out of GPU memory; at a later launch it holds the GPU `hold`
# seconds and runs out of memory iff another point shows up there. oom always runs out of memory, oom_first at its
# first launch only, error / host_oom / killed fail otherwise, ok (after holding `hold` seconds) finishes.
OOM_LAUNCHER = textwrap.dedent('''
    import json, os, signal, sys, time
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
    workdir, mode, hold = args["workdir"], args["config.mode"], float(args.get("config.hold", "0"))
    name = os.path.basename(workdir)
    with open(os.environ["FAKE_LAUNCH_MARKER"], "a") as f:
        f.write(name + "\\n")
    here = os.path.join(os.environ["FAKE_GPU_DIR"], os.environ.get("CUDA_VISIBLE_DEVICES", "none"))
    os.makedirs(here, exist_ok=True)
    mine = os.path.join(here, name)
    open(mine, "w").close()
    others = lambda: [n for n in os.listdir(here) if n != name and not n.endswith(".saw")]
    with open(os.environ["FAKE_LAUNCH_MARKER"]) as f:
        first_launch = [line.strip() for line in f].count(name) == 1
    try:
        if mode == "fits_alone" and first_launch:
            deadline = time.time() + 60  # the sibling is launched at once; the bound only stops a broken runner
            while time.time() < deadline and not others():
                time.sleep(0.01)
            seen = others()
            open(os.path.join(here, name + ".saw"), "w").close()
            while time.time() < deadline and not all(os.path.exists(os.path.join(here, n + ".saw")) for n in seen):
                time.sleep(0.01)
            print(OOM_LINE)
            sys.exit(1)
        elif mode == "fits_alone":
            deadline = time.time() + hold
            while time.time() < deadline and not others():
                time.sleep(0.01)
            if others():
                print(OOM_LINE)
                sys.exit(1)
        elif mode == "oom":
            print(OOM_LINE)
            sys.exit(1)
        elif mode == "oom_first" and first_launch:  # another process held the GPU at its first launch
            print(OOM_LINE)
            sys.exit(1)
        elif mode == "error":
            print("ValueError: not a memory problem")
            sys.exit(3)
        elif mode == "host_oom":  # Python's MemoryError: host RAM, not the GPU's
            print("MemoryError: Unable to allocate 64.0 GiB for an array")
            sys.exit(1)
        elif mode == "killed":  # the host OOM killer: SIGKILL, whatever the log said before
            print(OOM_LINE)
            os.remove(mine)
            os.kill(os.getpid(), signal.SIGKILL)
        else:
            time.sleep(hold)
    finally:
        if os.path.exists(mine):
            os.remove(mine)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump({"mode": mode}, f)
    with open(os.path.join(workdir, "summary.json"), "w") as f:
        json.dump({"eval/loss": 1.0}, f)
''').replace("OOM_LINE)", f"{OOM_LINE!r})")

OOM_TABLE = textwrap.dedent('''
    from shared.config.base import base_config

    def get_config(arg=None):
        c = base_config()
        c.mode, c.hold = "ok", 0.0
        return c

    def get_sweep(arg=None):
        points = [dict(name=name, overrides={"mode": mode, "hold": hold}) for name, mode, hold in POINTS]
        return dict(name="oom_table", points=points, columns=["eval/loss"])
''')


@pytest.fixture
def oom(setup, tmp_path, monkeypatch):  # noqa: F811
    """run(points, gpus, parallel): a sweep of (name, mode, hold) points on the fake GPUs `gpus`."""
    launcher = tmp_path / "oom_launcher.py"
    launcher.write_text(OOM_LAUNCHER)
    monkeypatch.setenv("FAKE_GPU_DIR", str(tmp_path / "gpus"))

    def run(points, gpus, parallel=None):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
        table = tmp_path / "oom_table.py"
        table.write_text(OOM_TABLE.replace("POINTS", repr(points)))
        return run_sweep(str(table), setup["workdir"], parallel=parallel, launcher_cmd=[sys.executable, str(launcher)],
                         echo=False)

    def ends(name):  # the statuses of a point's launches, in order
        with open(os.path.join(setup["workdir"], name, "launches.jsonl")) as f:
            return [r["status"] for r in map(json.loads, f) if r["event"] == "end"]

    return {"run": run, "ends": ends, "launches": setup["launches"], "workdir": setup["workdir"]}


def test_gpu_out_of_memory_is_told_from_other_failures():
    assert runner.ran_out_of_gpu_memory(1, "...\n" + OOM_LINE + "\n")
    assert runner.ran_out_of_gpu_memory(1, "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
                                           "allocate 17179869184 bytes.\n")
    assert runner.ran_out_of_gpu_memory(1, "E0000 cuda_driver.cc:1] failed to alloc: CUDA_ERROR_OUT_OF_MEMORY\n")
    assert not runner.ran_out_of_gpu_memory(1, "MemoryError: Unable to allocate 64.0 GiB for an array\n")
    assert not runner.ran_out_of_gpu_memory(1, "RESOURCE_EXHAUSTED: too many open files\nout of memory?\n")
    assert not runner.ran_out_of_gpu_memory(-9, OOM_LINE)   # SIGKILL: the host OOM killer, not the GPU
    assert not runner.ran_out_of_gpu_memory(137, OOM_LINE)  # the same through a shell
    assert not runner.ran_out_of_gpu_memory(0, OOM_LINE)


def test_a_point_out_of_gpu_memory_beside_others_is_requeued_with_one_point_fewer_on_its_gpu(oom, capsys):
    # 2 fake GPUs, 2 points on each: all four run out of memory, are requeued, and finish one per GPU at a time
    # (a fits_alone point finishes only when it runs alone, so finishing shows the GPU's limit dropped to 1)
    points = [(name, "fits_alone", 0.6) for name in ("a", "b", "c", "d")]
    result = oom["run"](points, gpus="0,1", parallel=4)
    out = capsys.readouterr().out
    assert result.ok and {o.status for o in result.outcomes.values()} == {"finished"}
    assert sorted(oom["launches"]()) == ["a", "a", "b", "b", "c", "c", "d", "d"]
    for gpu in ("0", "1"):
        lines = [line for line in out.splitlines() if f"ran out of GPU memory with 2 points on GPU {gpu}:" in line]
        assert len(lines) == 2 and all("requeued (1/2); at most 1 at once on that GPU from now" in x for x in lines)
    assert "FAILED" not in out
    for name in ("a", "b", "c", "d"):
        assert oom["ends"](name) == ["requeued", "finished"]
    with open(os.path.join(oom["workdir"], "manifest.json")) as f:
        manifest = json.load(f)
    for point in manifest["points"].values():
        assert point["status"] == "finished"
        assert [x["status"] for x in point["launches"]] == ["requeued", "finished"]
        assert "out of GPU memory with 2 points on GPU" in point["launches"][0]["reason"]
    assert {r["status"] for r in read_csv(os.path.join(oom["workdir"], "results.csv"))} == {"finished"}


def test_a_point_out_of_gpu_memory_alone_or_without_sharing_fails_as_before(oom):
    result = oom["run"]([("p", "oom", 0.0)], gpus="0,1", parallel=4)  # sharing, but alone on its GPU
    assert [o.name for o in result.failed] == ["p"] and oom["ends"]("p") == ["failed"]
    result = oom["run"]([("p", "oom", 0.0), ("q", "ok", 0.0)], gpus="0,1")  # one point per GPU: no sharing
    assert [o.name for o in result.failed] == ["p"] and oom["ends"]("p") == ["failed", "failed"]
    assert sorted(oom["launches"]()) == ["p", "p", "q"]


def test_other_failures_beside_others_on_a_gpu_are_not_retried(oom, capsys):
    points = [("error", "error", 0.0), ("host_oom", "host_oom", 0.0), ("killed", "killed", 0.0), ("ok", "ok", 0.3)]
    result = oom["run"](points, gpus="0", parallel=4)  # one GPU, four points on it
    assert sorted(o.name for o in result.failed) == ["error", "host_oom", "killed"]
    assert sorted(oom["launches"]()) == ["error", "host_oom", "killed", "ok"]
    assert "ran out of GPU memory" not in capsys.readouterr().out


def test_requeues_are_bounded(oom, monkeypatch):
    # "p" runs out of memory every time; a long point keeps its GPU shared when p's requeue starts
    monkeypatch.setattr(runner, "MAX_OOM_REQUEUES", 1)
    result = oom["run"]([("p", "oom", 0.0), ("long", "ok", 1.0), ("short", "ok", 0.1)], gpus="0", parallel=3)
    assert [o.name for o in result.failed] == ["p"]
    assert oom["ends"]("p") == ["requeued", "failed"] and oom["launches"]().count("p") == 2


def test_a_point_out_of_memory_alone_in_its_sweep_beside_other_tenants_is_retried_after_a_wait(oom, monkeypatch,
                                                                                             capsys):
    # one point at a time on one GPU that another sweep shares (runner.COTENANTS_ENV, set by shared.sweep.campaign):
    # the point that ran out of memory at its first launch starts again after COTENANT_RETRY_S and finishes
    monkeypatch.setenv(runner.COTENANTS_ENV, "1")
    monkeypatch.setattr(runner, "COTENANT_RETRY_S", 0.2)
    result = oom["run"]([("w", "oom_first", 0.0), ("x", "ok", 0.0)], gpus="0", parallel=1)
    out = capsys.readouterr().out
    assert result.ok and oom["ends"]("w") == ["requeued", "finished"]
    assert oom["launches"]() == ["w", "x", "w"]           # the other point ran while w waited
    assert "w ran out of GPU memory alone in this sweep on GPU 0, which other processes share" in out
    assert "requeued (1/4), starting again in 0s at the earliest" in out
    with open(os.path.join(oom["workdir"], "manifest.json")) as f:
        launches = json.load(f)["points"]["w"]["launches"]
    assert [x["status"] for x in launches] == ["requeued", "finished"] and "retried after" in launches[0]["reason"]

    # always out of memory: bounded by MAX_COTENANT_OOM_REQUEUES, the waits growing 0.2 s, 0.4 s
    monkeypatch.setattr(runner, "MAX_COTENANT_OOM_REQUEUES", 2)
    result = oom["run"]([("p", "oom", 0.0)], gpus="0", parallel=1)
    assert [o.name for o in result.failed] == ["p"] and oom["ends"]("p") == ["requeued", "requeued", "failed"]

    # without the variable a point alone on its GPU fails at once, as before
    monkeypatch.delenv(runner.COTENANTS_ENV)
    result = oom["run"]([("q", "oom_first", 0.0)], gpus="0", parallel=1)
    assert [o.name for o in result.failed] == ["q"] and oom["ends"]("q") == ["failed"]
