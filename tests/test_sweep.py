"""shared.sweep against a fake launcher (a tiny stdlib script writing config.json, metrics.jsonl, summary.json)."""
import ast
import csv
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from shared.sweep import format_override_value, parse_override_args, plan_slots, point_command, run_sweep
from shared.sweep.hardware import visible_gpus
from shared.sweep.table import Point, load_sweep

from conftest import REPO_ROOT as REPO  # noqa: E402

# Writes what the real launcher writes, from its overrides: eval/loss = lr * 10 + seed / 100 + 1 / step.
FAKE_LAUNCHER = textwrap.dedent('''
    import json, os, sys
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
    workdir = args["workdir"]
    overrides = {k[len("config."):]: v for k, v in args.items() if k.startswith("config.")}
    with open(os.environ["FAKE_LAUNCH_MARKER"], "a") as f:
        f.write(os.path.basename(workdir) + " " + args["config"] + "\\n")
    resumed = os.path.exists(os.path.join(workdir, "metrics.jsonl"))
    print("fake launcher:", workdir, "resumed" if resumed else "fresh")
    if overrides.get("fail") == "True":
        for i in range(30):
            print(f"log line {i}")
        sys.exit(3)
    lr, seed, steps = float(overrides["optim.lr"]), int(overrides.get("seed", 0)), int(overrides["train.steps"])
    if str(seed) == os.environ.get("FAKE_SLOW_SEED"):
        import time
        time.sleep(120)
    if os.environ.get("FAKE_SLEEP_S"):
        import time
        time.sleep(float(os.environ["FAKE_SLEEP_S"]))
    init_from = overrides.get("train.init_from", "")
    if init_from and not os.path.exists(os.path.join(init_from[len("run:"):], "summary.json")):
        sys.exit(4)  # started before the stage it warm-starts from had finished
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump({"optim": {"lr": lr}, "seed": seed, "train": {"steps": steps}, "arg": args["config"],
                   **({"init_from": init_from} if init_from else {})}, f)
    losses = {s: lr * 10 + seed / 100 + 1 / s for s in range(1, steps + 1)}
    with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
        for s, loss in losses.items():
            f.write(json.dumps({"step": s, "train/loss": loss + 0.5, "eval/loss": loss}) + "\\n")
    summary = {"eval/loss": losses[steps], "accuracy": 1 - lr, "device_kind": "cpu", "num_devices": 8,
               "wall_time_s": 0.01}
    with open(os.path.join(workdir, "summary.json"), "w") as f:
        json.dump(summary, f)
''')

TABLE = textwrap.dedent('''
    from shared.config.base import base_config

    def get_config(arg=None):
        c = base_config()
        c.fail = False
        return c

    def get_sweep(arg=None):
        points = [dict(name=f"lr{lr}_s{seed}", overrides={"optim.lr": lr, "seed": seed})
                  for lr in (0.1, 0.2) for seed in (0, 1, 2)]
        if arg == "with_failure":
            points.append(dict(name="broken", overrides={"optim.lr": 0.3, "seed": 0, "fail": True}))
        stages = []
        if arg == "with_stages":  # one warm start per seed, shared by both arms of that seed; seed 2's fails
            stages = [dict(name=f"sft_s{seed}", overrides={"optim.lr": 0.05, "seed": seed, "fail": seed == 2})
                      for seed in (0, 1, 2)]
            for point in points:
                point["overrides"]["train.init_from"] = "run:{stage:sft_s%d}" % point["overrides"]["seed"]
        return dict(name="lr_table", points=points, columns=["eval/loss", "accuracy"], group=["optim.lr"],
                    plot=dict(kind=PLOT_KIND, metric="eval/loss", x="step", label="optim.lr"), stages=stages)
''')


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A table file, the fake launcher and the marker file that counts launches."""
    launcher = tmp_path / "fake_launcher.py"
    launcher.write_text(FAKE_LAUNCHER)
    marker = tmp_path / "launches.txt"
    monkeypatch.setenv("FAKE_LAUNCH_MARKER", str(marker))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # CPU: no GPU slots, whatever this machine has

    def table(plot_kind="curves"):
        path = tmp_path / f"table_{plot_kind}.py"
        path.write_text(TABLE.replace("PLOT_KIND", repr(plot_kind)))
        return str(path)

    def launches():
        return marker.read_text().splitlines() if marker.exists() else []

    return dict(table=table, launcher=[sys.executable, str(launcher)], launches=launches,
                workdir=str(tmp_path / "sweep"))


def expected_loss(lr, seed, steps):
    return lr * 10 + seed / 100 + 1 / steps


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_override_values_are_formatted_for_ml_collections():
    assert format_override_value("adamw") == "adamw"
    assert format_override_value("a b/c.txt") == "a b/c.txt"
    assert format_override_value(True) == "True" and format_override_value(False) == "False"
    assert format_override_value(3) == "3"
    assert format_override_value(1e-3) == "0.001" and format_override_value(1e-5) == "1e-05"
    assert format_override_value(np.float32(0.5)) == "0.5" and format_override_value(np.int64(7)) == "7"
    assert format_override_value(None) == "None"
    assert ast.literal_eval(format_override_value(["lm", "scalar"])) == ["lm", "scalar"]
    assert ast.literal_eval(format_override_value([("math/boxed", 1.0), ("x", np.float64(0.2))])) == \
        [("math/boxed", 1.0), ("x", 0.2)]
    with pytest.raises(TypeError, match="cannot be passed"):
        format_override_value(object())


def test_formatted_values_parse_with_ml_collections_config_flags(tmp_path, monkeypatch):
    from absl import flags
    from ml_collections import config_flags

    config = tmp_path / "cfg.py"
    config.write_text("from shared.config.base import base_config\n"
                      "def get_config(arg=None):\n    c = base_config()\n    c.pair = (1, 2)\n    return c\n")
    values = {"optim.lr": 1e-5, "train.progress": False, "data.path": "a b/c.txt", "train.steps": np.int64(7),
              "pair": (3, 4, 5), "optim.b2": 1}
    argv = [a for a in point_command(["prog"], str(config), Point("p", values, None), "wd", {})
            if not a.startswith("--workdir")]
    monkeypatch.setattr(sys, "argv", argv)  # config_flags reads the overrides from sys.argv
    flag_values = flags.FlagValues()
    config_flags.DEFINE_config_file("config", flag_values=flag_values)
    flag_values(argv)
    c = flag_values.config
    assert (c.optim.lr, c.train.progress, c.data.path, c.train.steps, c.pair, c.optim.b2) == \
        (1e-5, False, "a b/c.txt", 7, (3, 4, 5), 1.0)


def test_point_command_and_cli_overrides():
    extra = parse_override_args(["--config.train.steps=5", "optim.lr=0.5"])
    assert extra == {"train.steps": "5", "optim.lr": "0.5"}
    command = point_command(["python", "-m", "shared.launch"], "experiments/x/t.py",
                            Point("a", {"optim.lr": 0.1, "seed": 2}, "smoke"), "out/a", extra)
    # The command line's value wins and each key appears once (tuple flags would otherwise accumulate).
    assert command == ["python", "-m", "shared.launch", "--config=experiments/x/t.py:smoke", "--workdir=out/a",
                       "--config.optim.lr=0.5", "--config.seed=2", "--config.train.steps=5"]
    with pytest.raises(ValueError, match="--config.a.b=value"):
        parse_override_args(["--config.novalue"])


def test_gpu_slots(monkeypatch):
    assert plan_slots(["0", "1", "2"], None) == ["0", "1", "2"]
    assert plan_slots(["0", "1", "2"], 2) == ["0", "1"]
    assert plan_slots(["0", "1", "2", "3"], None, gpus_per_point=2) == ["0,1", "2,3"]
    assert plan_slots([], None) == [None]           # CPU: one at a time
    assert plan_slots([], 3) == [None] * 3          # unless --parallel
    assert plan_slots(["0"], None) == [None]        # one GPU: leave CUDA_VISIBLE_DEVICES alone
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert visible_gpus() == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert visible_gpus() == []


def test_sweep_results_plot_manifest_and_resume(setup):
    table = setup["table"]("curves")
    result = run_sweep(table, setup["workdir"], parallel=2, extra_overrides=["--config.train.steps=4"],
                       launcher_cmd=setup["launcher"], echo=False)
    assert result.ok and len(setup["launches"]()) == 6

    rows = read_csv(os.path.join(setup["workdir"], "results.csv"))
    assert [r["name"] for r in rows] == [f"lr{lr}_s{s}" for lr in (0.1, 0.2) for s in (0, 1, 2)]
    for row in rows:
        lr, seed = float(row["optim.lr"]), int(row["seed"])
        with open(os.path.join(setup["workdir"], row["name"], "summary.json")) as f:
            summary = json.load(f)
        assert row["status"] == "finished"
        assert float(row["eval/loss"]) == summary["eval/loss"] == pytest.approx(expected_loss(lr, seed, 4))
        assert float(row["accuracy"]) == pytest.approx(1 - lr)

    # Aggregation over seeds, by hand: sample std (ddof=1).
    md = open(os.path.join(setup["workdir"], "results.md")).read()
    for lr in (0.1, 0.2):
        losses = [expected_loss(lr, s, 4) for s in (0, 1, 2)]
        mean, std = statistics.fmean(losses), float(np.std(losses, ddof=1))
        assert f"| {lr:.4g} | 3 | {mean:.4g} ± {std:.2g} |" in md
    assert f"| lr0.2_s1 | finished | 0.2 | 1 | {expected_loss(0.2, 1, 4):.4g} | 0.8 |" in md

    with open(os.path.join(setup["workdir"], "lr_table.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    manifest = json.load(open(os.path.join(setup["workdir"], "manifest.json")))
    assert {"source", "command_line", "points", "hardware", "libraries", "start_time", "end_time",
            "wall_time_s"} <= set(manifest)
    from shared.sweep import provenance
    assert manifest["source"]["hash"] == provenance.source_hash()  # the code on disk, named by content
    assert set(manifest["source"]) >= {"hash", "files", "commit", "named_by", "git_head"}
    for point in manifest["points"].values():  # one launch each, recorded with the code that ran it
        [launch] = point["launches"]
        assert launch["status"] == "finished" and launch["returncode"] == 0
        assert launch["source"]["hash"] == manifest["source"]["hash"] and launch["seconds"] > 0
    assert manifest["points"]["lr0.1_s2"]["config"] == {"optim": {"lr": 0.1}, "seed": 2, "train": {"steps": 4},
                                                      "arg": table}
    assert manifest["hardware"]["device_kind"] == ["cpu"] and manifest["hardware"]["num_devices"] == [8]
    assert {"jax", "flax", "optax", "orbax-checkpoint", "grain", "numpy"} <= set(manifest["libraries"])
    assert "--config.train.steps=4" in manifest["command_line"]

    # Re-running launches nothing and rewrites the same table.
    again = run_sweep(table, setup["workdir"], extra_overrides=["--config.train.steps=4"],
                      launcher_cmd=setup["launcher"], echo=False)
    assert again.launched == [] and len(setup["launches"]()) == 6
    kept = json.load(open(os.path.join(setup["workdir"], "manifest.json")))
    for name, point in kept["points"].items():  # the launches of the earlier run stay in the manifest
        assert point["launches"] == manifest["points"][name]["launches"]
    assert "## Launches" in open(os.path.join(setup["workdir"], "results.md")).read()
    assert read_csv(os.path.join(setup["workdir"], "results.csv")) == rows


def test_failing_point_is_reported_and_others_finish(setup, capsys):
    table = setup["table"]("bars") + ":with_failure"
    # Through the command line, which must exit non-zero.
    proc = subprocess.run([sys.executable, "-m", "shared.sweep", f"--config={table}",
                           f"--workdir={setup['workdir']}", "--config.train.steps=3",
                           "--launcher", " ".join(setup["launcher"])],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED broken: return code 3" in proc.stdout
    assert "log line 29" in proc.stdout and "log line 5\n" not in proc.stdout.split("FAILED broken")[-1]
    rows = {r["name"]: r for r in read_csv(os.path.join(setup["workdir"], "results.csv"))}
    assert rows["broken"]["status"] == "failed" and rows["broken"]["eval/loss"] == ""
    assert all(r["status"] == "finished" for name, r in rows.items() if name != "broken")
    assert "failed (return code 3)" in open(os.path.join(setup["workdir"], "results.md")).read()
    assert os.path.exists(os.path.join(setup["workdir"], "lr_table.png"))  # bars with error bars
    log = open(os.path.join(setup["workdir"], "broken", "log.txt")).read()
    assert "log line 0" in log and "log line 29" in log

    # Only the failed point is retried, in the same workdir.
    result = run_sweep(table, setup["workdir"], extra_overrides={"train.steps": 3},
                       launcher_cmd=setup["launcher"], echo=False)
    assert result.launched == ["broken"] and [o.name for o in result.failed] == ["broken"]
    assert result.failed[0].returncode == 3 and "log line 29" in result.failed[0].log_tail
    assert "log line 9\n" not in result.failed[0].log_tail  # the last 20 lines only
    manifest = json.load(open(os.path.join(setup["workdir"], "manifest.json")))
    launches = manifest["points"]["broken"]["launches"]  # both launches of the retried point are kept
    assert [(x["status"], x["returncode"]) for x in launches] == [("failed", 3), ("failed", 3)]
    assert len({x["launch_id"] for x in launches}) == 2


def test_only_and_unfinished_point_rerun_in_place(setup):
    table = setup["table"]()
    result = run_sweep(table, setup["workdir"], only="lr0.1_s0,lr0.2_s0",
                       extra_overrides=["--config.train.steps=2"], launcher_cmd=setup["launcher"], echo=False)
    assert sorted(result.launched) == ["lr0.1_s0", "lr0.2_s0"]
    rows = {r["name"]: r["status"] for r in read_csv(os.path.join(setup["workdir"], "results.csv"))}
    assert rows["lr0.1_s0"] == "finished" and rows["lr0.1_s1"] == "not run"

    # An interrupted point (metrics but no summary) is re-run with the same command in the same folder.
    interrupted = os.path.join(setup["workdir"], "lr0.1_s1")
    os.makedirs(interrupted)
    with open(os.path.join(interrupted, "metrics.jsonl"), "w") as f:
        f.write('{"step": 1, "eval/loss": 9.0}\n')
    result = run_sweep(table, setup["workdir"], extra_overrides=["--config.train.steps=2"],
                       launcher_cmd=setup["launcher"], echo=False)
    assert sorted(result.launched) == ["lr0.1_s1", "lr0.1_s2", "lr0.2_s1", "lr0.2_s2"] and result.ok
    assert "resumed" in open(os.path.join(interrupted, "log.txt")).read()
    assert len(setup["launches"]()) == 6


def test_bad_tables_fail_before_launching(setup, tmp_path):
    table = setup["table"]()
    with pytest.raises(ValueError, match="'optim.lrr'.*did you mean 'optim.lr'"):
        run_sweep(table, setup["workdir"], extra_overrides=["--config.optim.lrr=1"],
                  launcher_cmd=setup["launcher"], echo=False)
    with pytest.raises(ValueError, match="'lr'.*did you mean 'optim.lr'"):  # a key named by its last part
        run_sweep(table, setup["workdir"], extra_overrides=["--config.lr=1"],
                  launcher_cmd=setup["launcher"], echo=False)
    with pytest.raises(ValueError, match="unknown point.*nope"):
        run_sweep(table, setup["workdir"], only="nope", launcher_cmd=setup["launcher"], echo=False)
    mixed = tmp_path / "mixed.py"
    mixed.write_text(TABLE.replace("PLOT_KIND", "'bars'").replace(
        '"seed": seed}', '"seed": seed, "train.steps": 2 + seed}'))
    with pytest.raises(ValueError, match="differ in 'train.steps'"):
        load_sweep(str(mixed))
    assert setup["launches"]() == []


def test_dry_run_launches_nothing(setup, capsys):
    run_sweep(setup["table"](), setup["workdir"], dry_run=True, launcher_cmd=setup["launcher"])
    out = capsys.readouterr().out
    assert "would run" in out and "--config.optim.lr=0.2" in out and "--config.seed=2" in out
    assert setup["launches"]() == [] and not os.path.exists(os.path.join(setup["workdir"], "results.csv"))


def test_point_arg_variant_and_no_jax_in_sweep_process(setup, tmp_path):
    table = tmp_path / "variants.py"
    table.write_text(textwrap.dedent('''
        from shared.config.base import base_config
        def get_config(arg=None):
            return base_config()
        def get_sweep(arg=None):
            return dict(name="variants", columns=["eval/loss"],
                        points=[dict(name="default", overrides={"optim.lr": 0.1}),
                                dict(name="small", overrides={"optim.lr": 0.1}, arg="smoke")])
    '''))
    result = run_sweep(str(table), setup["workdir"], extra_overrides=["--config.train.steps=2"],
                       launcher_cmd=setup["launcher"], echo=False)
    assert result.ok and "plot" not in result.outputs  # no plot spec, no plot
    rows = read_csv(os.path.join(setup["workdir"], "results.csv"))
    assert [(r["name"], r["arg"]) for r in rows] == [("default", ""), ("small", "smoke")]
    manifest = json.load(open(os.path.join(setup["workdir"], "manifest.json")))
    assert manifest["points"]["small"]["config"]["arg"] == f"{table}:smoke"

    # The scheduler process never imports jax (it would grab GPUs the points need).
    probe = ("import sys; from shared.sweep import load_sweep; import shared.sweep.__main__; "
             f"load_sweep({str(table)!r}); print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_command_line_parsing():
    from shared.sweep.__main__ import parse_args

    args = parse_args(["--config", "t.py:smoke", "--workdir=out", "--parallel=2", "--only=a,b", "--dry_run",
                       "--config.optim.lr=0.1", "--config.data.path", "a b.txt"])
    assert args == {"config_path": "t.py:smoke", "workdir": "out", "parallel": 2, "only": "a,b", "dry_run": True,
                    "gpus_per_point": 1, "launcher_cmd": None, "time_budget_s": None,
                    "bundle": None, "from_bundle": None, "bundle_partial": False, "bundle_part_mb": None,
                    "from_results": None, "rerun": None, "stages_at_once": None, "finish_in_budget": False,
                    "extra_overrides": ["--config.optim.lr=0.1", "--config.data.path=a b.txt"]}
    args = parse_args(["--config=t.py", "--workdir=out", "--bundle=o.tar.gz", "--bundle_partial",
                       "--bundle_part_mb=15", "--from_bundle", "i.tar.gz"])
    assert (args["bundle"], args["bundle_partial"], args["bundle_part_mb"], args["from_bundle"]) == (
        "o.tar.gz", True, 15.0, "i.tar.gz")
    args = parse_args(["--config=t.py", "--workdir=out", "--from_results=projects/p/results/t", "--rerun=warm_s2,x*"])
    assert (args["from_results"], args["rerun"]) == ("projects/p/results/t", "warm_s2,x*")
    assert parse_args(["--config=t.py", "--workdir=out", "--time_budget_s=5", "--finish_in_budget"])[
        "finish_in_budget"] is True
    with pytest.raises(SystemExit, match="unknown argument '--paralel=2'"):
        parse_args(["--config=t.py", "--workdir=out", "--paralel=2"])
    with pytest.raises(SystemExit, match="--workdir is required"):
        parse_args(["--config=t.py"])


def test_unreadable_summary_marks_point_failed(setup):
    table = setup["table"]()
    run_sweep(table, setup["workdir"], only=["lr0.1_s0", "lr0.1_s1"], extra_overrides=["--config.train.steps=2"],
              launcher_cmd=setup["launcher"], echo=False)
    with open(os.path.join(setup["workdir"], "lr0.1_s1", "summary.json"), "w") as f:
        f.write('{"eval/loss": 1.')  # e.g. written non-atomically and cut short
    result = run_sweep(table, setup["workdir"], only=["lr0.1_s0"], launcher_cmd=setup["launcher"], echo=False)
    assert [o.name for o in result.failed] == ["lr0.1_s1"] and "invalid JSON" in result.failed[0].reason
    rows = {r["name"]: r["status"] for r in read_csv(os.path.join(setup["workdir"], "results.csv"))}
    assert rows == {"lr0.1_s0": "finished", "lr0.1_s1": "failed", "lr0.1_s2": "not run", "lr0.2_s0": "not run",
                    "lr0.2_s1": "not run", "lr0.2_s2": "not run"}


def test_time_budget_stops_slow_points_and_writes_the_finished_ones(setup, monkeypatch):
    monkeypatch.setenv("FAKE_SLOW_SEED", "2")  # points with seed 2 would take 120 s
    start = time.time()
    result = run_sweep(setup["table"](), setup["workdir"], parallel=2, extra_overrides=["--config.train.steps=2"],
                       launcher_cmd=setup["launcher"], echo=False, time_budget_s=6)
    assert time.time() - start < 60
    status = {name: o.status for name, o in result.outcomes.items()}
    assert status == {"lr0.1_s0": "finished", "lr0.1_s1": "finished", "lr0.1_s2": "not run",
                      "lr0.2_s0": "finished", "lr0.2_s1": "finished", "lr0.2_s2": "not run"}
    rows = {r["name"]: r for r in read_csv(os.path.join(setup["workdir"], "results.csv"))}
    assert float(rows["lr0.2_s1"]["eval/loss"]) == pytest.approx(expected_loss(0.2, 1, 2))
    manifest = json.load(open(os.path.join(setup["workdir"], "manifest.json")))
    assert "--time_budget_s=6" in manifest["command_line"]


def test_finish_in_budget_holds_what_the_measured_launches_say_cannot_finish(setup, monkeypatch):
    """A lease's last call: points of a kind that took ~1.5 s here do not start with 1 s of the budget left (they
    would be lost half-done with the machine) and are listed as held; with time enough they run."""
    monkeypatch.setenv("FAKE_SLEEP_S", "1.5")
    table, workdir = setup["table"](), setup["workdir"]
    kwargs = dict(extra_overrides=["--config.train.steps=2"], launcher_cmd=setup["launcher"], echo=False)
    run_sweep(table, workdir, parallel=2, only=["lr0.1_s0", "lr0.1_s1"], **kwargs)
    assert len(setup["launches"]()) == 2
    with pytest.raises(ValueError, match="needs --time_budget_s"):
        run_sweep(table, workdir, finish_in_budget=True, **kwargs)
    held = run_sweep(table, workdir, parallel=2, time_budget_s=1.0, finish_in_budget=True, **kwargs)
    assert len(setup["launches"]()) == 2                                    # nothing started
    not_run = {n: o.reason for n, o in held.outcomes.items() if o.status == "not run"}
    assert set(not_run) == {"lr0.1_s2", "lr0.2_s0", "lr0.2_s1", "lr0.2_s2"}
    assert all(r.startswith("held for the next lease: needs ~") for r in not_run.values()), not_run
    done = run_sweep(table, workdir, parallel=2, time_budget_s=60, finish_in_budget=True, **kwargs)
    assert all(o.status in ("finished", "skipped") for o in done.outcomes.values())


def test_seconds_still_needed_is_the_median_of_its_kind_less_what_it_ran(tmp_path):
    """By arm where points have arms (an evaluation-only arm is not an RL arm), "stage" for stages, nothing to go
    by -> None; a resumed point needs the median less the seconds its earlier launches ran."""
    from shared.sweep.runner import seconds_still_needed
    from shared.sweep.table import Point

    def ran(name, *seconds):
        os.makedirs(tmp_path / name, exist_ok=True)
        with open(tmp_path / name / "launches.jsonl", "w") as f:
            for i, sec in enumerate(seconds):
                f.write(json.dumps({"launch_id": f"{name}{i}", "event": "end", "seconds": sec}) + "\n")
        return str(tmp_path / name)

    durations = {"stage": [100.0, 300.0, 200.0], "arm rl": [50.0, 70.0], "point": [5.0]}
    stages = {"warm_s0"}
    assert seconds_still_needed(Point("warm_s0", {}, None), ran("warm_s0"), durations, stages) == 200.0
    assert seconds_still_needed(Point("rl_s0", {}, None, arm="rl"), ran("rl_s0", 20.0, 15.0), durations, stages) \
        == pytest.approx(25.0)
    assert seconds_still_needed(Point("rl_s1", {}, None, arm="rl"), ran("rl_s1", 90.0), durations, stages) == 0.0
    assert seconds_still_needed(Point("x", {}, None), ran("x"), durations, stages) == 5.0
    assert seconds_still_needed(Point("sft_s0", {}, None, arm="sft"), ran("sft_s0"), {"stage": [1.0]}, stages) is None


# -- provenance: the code a point ran, named by content ---------------------------------------------------
def _git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_source_hash_names_the_commit_even_without_git(tmp_path):
    """The hash of files on disk equals the hash of the commit they came from (git blob ids), a copy without .git
    still verifies, results files do not count, and any source change breaks the match."""
    from shared.sweep import provenance, verify

    repo = tmp_path / "repo"
    (repo / "shared").mkdir(parents=True)
    (repo / "shared" / "a.py").write_text("x = 1\n")
    (repo / "projects" / "p").mkdir(parents=True)
    (repo / "projects" / "p" / "b.py").write_text("y = 2\n")
    (repo / "pyproject.toml").write_text("[project]\n")
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = _git(repo, "rev-parse", "HEAD")
    on_disk = provenance.source_hash(str(repo))
    assert on_disk == provenance.commit_hash(commit, str(repo))
    # a commit field of a manifest from elsewhere reaches git only as a commit id or ref name, never as an option
    assert provenance.commit_hash("--output=" + str(tmp_path / "x"), str(repo)) is None
    assert provenance.commit_hash(123, str(repo)) is None and not (tmp_path / "x").exists()
    # by hand: sha256 over "<blob id> <path>" lines, blob id = git hash-object
    lines = "".join(f"{_git(repo, 'hash-object', p)} {p}\n" for p in ("projects/p/b.py", "pyproject.toml", "shared/a.py"))
    assert on_disk == hashlib.sha256(lines.encode()).hexdigest()

    (repo / "projects" / "p" / "results.csv").write_text("a,b\n")  # results are not source
    state = provenance.source_state(str(repo))
    assert state["hash"] == on_disk and state["commit"] == commit and state["files"] == 3  # HEAD is the code

    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"source": state, "points": {"a": {"launches": [{"launch_id": "l1", "source": state}]}}}))
    assert verify.verify(str(manifest), commit, str(repo))[0]
    ok, lines_out = verify.verify(str(manifest), None, str(repo))
    assert ok and commit[:10] in lines_out[0]

    copy = tmp_path / "copy"  # a machine whose .git is missing (or stale) names the same code
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    copied = provenance.source_state(str(copy))
    assert copied["hash"] == on_disk and copied["commit"] is None
    # --record names the commit from the hash, in the sweep's record and every launch's; nothing else changes
    manifest.write_text(json.dumps({"source": copied, "points": {"a": {"status": "finished",
                                                                         "launches": [{"source": dict(copied)}]}}}))
    assert verify.verify(str(manifest), None, str(repo), record=True)[0]
    recorded = json.loads(manifest.read_text())
    assert recorded["source"]["commit"] == recorded["points"]["a"]["launches"][0]["source"]["commit"] == commit
    assert recorded["points"]["a"]["status"] == "finished" and recorded["source"]["hash"] == on_disk
    assert verify.verify(str(manifest), None, str(repo))[0]

    (repo / "shared" / "a.py").write_text("x = 2\n")  # an edit: the hash moves, verification fails
    changed = provenance.source_state(str(repo))
    assert changed["hash"] != on_disk and changed["commit"] is None and changed["git_head"] == commit
    manifest.write_text(json.dumps({"source": changed, "points": {}}))
    ok, lines_out = verify.verify(str(manifest), commit, str(repo))
    assert not ok and lines_out[0].startswith("BAD")
    assert not verify.verify(str(manifest), None, str(repo), record=True)[0]
    assert json.loads(manifest.read_text())["source"]["commit"] is None  # nothing recorded for a bad hash
    assert verify.main([str(manifest)]) == 1
    lying = dict(state, commit=commit, hash=changed["hash"])  # a commit named beside a hash it does not have
    manifest.write_text(json.dumps({"source": lying, "points": {}}))
    assert not verify.verify(str(manifest), None, str(repo))[0]

    manifest.write_text(json.dumps({"git": {"commit": commit, "dirty": True}, "points": {}}))
    ok, lines_out = verify.verify(str(manifest), None, str(repo))
    assert not ok and "legacy manifest" in lines_out[0]


# Manifests written before source hashes existed; each table is re-run with provenance (issue 20), and this list
# only shrinks: a new manifest must verify.
LEGACY_MANIFESTS = {
    "projects/clipo/results/tinygsm_sym_table/manifest.json",
    "projects/mdm_variance/results/accuracy/manifest.json",
    "projects/mdm_variance/results/variance/manifest.json",
    "projects/siamesenorm/results/ablation/manifest.json",
    "projects/siamesenorm/results/depth/manifest.json",
    "projects/siamesenorm/results/depth_lr0.003/manifest.json",
    "projects/siamesenorm/results/lr_stability/manifest.json",
}


def test_every_committed_manifest_verifies():
    from shared.sweep import verify

    listed = subprocess.run(["git", "-C", REPO, "ls-files", "*manifest.json"], capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    manifests = [m for m in listed.stdout.split() if os.path.basename(m) == "manifest.json"]
    for path in manifests:
        ok, lines = verify.verify(os.path.join(REPO, path))
        if path in LEGACY_MANIFESTS:
            assert not ok and "legacy manifest" in lines[0], f"{path} verifies now: drop it from LEGACY_MANIFESTS"
        else:
            assert ok, "\n".join(lines)
            with open(os.path.join(REPO, path), encoding="utf-8") as f:
                records = verify.source_records(json.load(f))
            unnamed = [where for where, source in records if not source.get("commit")]
            assert not unnamed, f"{path}: no commit named for {unnamed[:3]}: run python -m shared.sweep.verify --record"


def test_stages_run_once_per_seed_before_the_points_that_start_from_them(setup):
    table = setup["table"]() + ":with_stages"
    result = run_sweep(table, setup["workdir"], parallel=3, extra_overrides=["--config.train.steps=2"],
                       launcher_cmd=setup["launcher"], echo=False)
    launched = [line.split()[0] for line in setup["launches"]()]
    assert sorted(launched) == sorted(["sft_s0", "sft_s1", "sft_s2", "lr0.1_s0", "lr0.2_s0", "lr0.1_s1", "lr0.2_s1"])
    stage_dir = os.path.join(setup["workdir"], "stages", "sft_s1")
    config = json.load(open(os.path.join(setup["workdir"], "lr0.2_s1", "config.json")))
    assert config["init_from"] == f"run:{os.path.abspath(stage_dir)}"  # both arms of seed 1 share one warm start
    outcomes = {name: o.status for name, o in result.outcomes.items()}
    assert outcomes["sft_s2"] == "failed" and outcomes["lr0.1_s2"] == outcomes["lr0.2_s2"] == "not run"
    assert result.outcomes["lr0.1_s2"].reason == "stage sft_s2 did not finish"
    rows = [r["name"] for r in read_csv(os.path.join(setup["workdir"], "results.csv"))]
    assert rows == [f"lr{lr}_s{s}" for lr in (0.1, 0.2) for s in (0, 1, 2)]  # stages stay out of the tables
    manifest = json.load(open(os.path.join(setup["workdir"], "manifest.json")))
    assert manifest["stages"]["sft_s0"]["status"] == "finished" and manifest["stages"]["sft_s0"]["launches"]

    again = run_sweep(table, setup["workdir"], only="lr0.1_s0", extra_overrides=["--config.train.steps=2"],
                      launcher_cmd=setup["launcher"], echo=False)
    assert again.launched == []  # the point and its stage are finished: nothing to run


def test_points_whose_stages_finished_start_before_the_next_stage(setup):
    # one slot: seed 0's two points run before seed 1's stage, so a time budget that ends the sweep early leaves
    # whole seeds (every arm from the same warm start) rather than one arm of every seed
    table = setup["table"]() + ":with_stages"
    run_sweep(table, setup["workdir"], parallel=1, extra_overrides=["--config.train.steps=2"],
              launcher_cmd=setup["launcher"], echo=False)
    launched = [line.split()[0] for line in setup["launches"]()]
    assert launched == ["sft_s0", "lr0.1_s0", "lr0.2_s0", "sft_s1", "lr0.1_s1", "lr0.2_s1", "sft_s2"]


def test_stages_at_once_trains_one_warm_start_at_a_time_beside_the_points(setup):
    # three slots but one stage at a time: seed 1's stage waits for seed 0's, and seed 0's arms start beside it
    table = setup["table"]() + ":with_stages"
    run_sweep(table, setup["workdir"], parallel=3, stages_at_once=1, extra_overrides=["--config.train.steps=2"],
              launcher_cmd=setup["launcher"], echo=False)
    launched = [line.split()[0] for line in setup["launches"]()]
    # (without the limit the three stages start first, together)
    assert launched[0] == "sft_s0" and set(launched[1:4]) == {"lr0.1_s0", "lr0.2_s0", "sft_s1"}
    assert "sft_s2" in launched[4:]
    with pytest.raises(ValueError, match="stages_at_once=0"):
        run_sweep(table, setup["workdir"], stages_at_once=0, launcher_cmd=setup["launcher"], echo=False)


def test_a_workdir_holding_another_table_is_refused_before_anything_runs(setup):
    run_sweep(setup["table"](), setup["workdir"], only="lr0.1_s0", extra_overrides=["--config.train.steps=2"],
              launcher_cmd=setup["launcher"], echo=False)
    before = open(os.path.join(setup["workdir"], "results.csv")).read()
    with pytest.raises(ValueError, match=r"holds the table 'lr_table' of .*table_curves.py, not 'lr_table' of "
                                         r".*:with_stages; use a new --workdir"):
        run_sweep(setup["table"]() + ":with_stages", setup["workdir"], launcher_cmd=setup["launcher"], echo=False)
    assert open(os.path.join(setup["workdir"], "results.csv")).read() == before and len(setup["launches"]()) == 1
    again = run_sweep(setup["table"](), setup["workdir"], only="lr0.1_s1",   # the same table: a resume
                      extra_overrides=["--config.train.steps=2"], launcher_cmd=setup["launcher"], echo=False)
    assert again.launched == ["lr0.1_s1"]


def test_a_stage_reference_must_name_an_earlier_stage(tmp_path):
    table = tmp_path / "bad.py"
    table.write_text(textwrap.dedent('''
        def get_config(arg=None):
            return {"train": {"init_from": ""}}
        def get_sweep(arg=None):
            return dict(name="t", stages=[dict(name="a", overrides={"train.init_from": "run:{stage:b}"}),
                                          dict(name="b", overrides={})],
                        points=[dict(name="p", overrides={})])
    '''))
    with pytest.raises(ValueError, match="names stage 'b', which is not a stage listed before it"):
        load_sweep(str(table))


def test_a_point_end_line_names_its_main_metric_the_count_and_an_eta(tmp_path):
    from shared.sweep.report import progress_note
    from shared.sweep.table import Sweep

    sweep = Sweep(name="t", points=[], columns=["eval/missing", "eval/loss", "diverged"], group=[], plot=None,
                  config_file="x.py", config_arg=None, get_config=lambda arg=None: None)
    (tmp_path / "summary.json").write_text('{"eval/loss": 1.4271996, "diverged": false}')
    # 2 of 6 points ended after 100 s: 4 left at 50 s each
    assert progress_note(sweep, str(tmp_path), 2, 6, 100.0) == " | eval/loss 1.427 | 2/6 run, ETA 3m20s"
    assert progress_note(sweep, str(tmp_path / "failed"), 6, 6, 100.0) == " | 6/6 run"


def test_plots_a_person_can_read(tmp_path):
    """Axis labels with units, a title naming the table and the metric, error bars over seeds, log x for a
    log-spaced swept value."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from shared.sweep import report
    from shared.sweep.table import Point, Sweep

    assert report.axis_label("eval/loss") == "eval/loss (nats per token)"
    assert report.axis_label("eval/test_accuracy") == "eval/test_accuracy (fraction)"
    assert report.axis_label("step") == "training step" and report.axis_label("optim.lr") == "peak learning rate"
    assert report.log_spaced([1e-4, 3e-4, 1e-3, 3e-3]) and not report.log_spaced([1, 2, 3, 4, 5])

    points = [Point(f"lr{lr:g}_s{s}", {"optim.lr": lr, "seed": s}, None) for lr in (1e-4, 1e-3, 1e-2) for s in (0, 1)]
    sweep = Sweep(name="lr_table", points=points, columns=["eval/loss"], group=["optim.lr"],
                  plot={"kind": "xy", "metric": "eval/loss", "x": "optim.lr", "label": None}, config_file="x.py",
                  config_arg=None, get_config=lambda arg=None: None)
    rows = [{"name": p.name, "status": "finished", "eval/loss": 2.0 + p.overrides["seed"], "_summary": {}}
            for p in points]
    saved = {}
    original = plt.Figure.savefig

    def keep(fig, path, **kwargs):
        saved["ax"] = fig.axes[0]
        return original(fig, path, **kwargs)

    plt.Figure.savefig = keep
    try:
        path = report.plot(sweep, str(tmp_path), rows, report.aggregate(sweep, rows))
    finally:
        plt.Figure.savefig = original
    ax = saved["ax"]
    assert os.path.exists(path) and path.endswith("lr_table.png")
    assert ax.get_title() == "lr_table: eval/loss, mean ± std over seeds"
    assert ax.get_xlabel() == "peak learning rate" and ax.get_ylabel() == "eval/loss (nats per token)"
    assert ax.get_xscale() == "log"
    assert len(ax.containers) == 1 and ax.containers[0].has_yerr  # error bars over the 2 seeds


# -- signals: a stopped sweep stops its points, a killed one takes them along -----------------------------
SLEEPY_LAUNCHER = textwrap.dedent('''
    import os, signal, sys, time
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
    workdir = args["workdir"]

    def term(signum, frame):  # as the launcher: save the step, then exit 143
        time.sleep(0.5)
        with open(os.path.join(workdir, "saved"), "w") as f:
            f.write(str(signum))
        sys.exit(143)

    signal.signal(signal.SIGTERM, term)
    with open(os.path.join(workdir, "pid"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
''')


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\\tZ" not in next(line for line in f if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        return False


def _wait_for(predicate, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and the parent-death signal")
@pytest.mark.parametrize("signame", ["TERM", "INT", "KILL"])
def test_a_stopped_sweep_stops_its_points_and_a_killed_one_takes_them_along(setup, tmp_path, signame):
    """SIGTERM / SIGINT: the sweep forwards SIGTERM to its running point, waits for it to save and exits 128 + n
    with one line. SIGKILL: the point dies with the sweep (parent-death signal), no orphan keeps running."""
    import signal

    launcher = tmp_path / "sleepy_launcher.py"
    launcher.write_text(SLEEPY_LAUNCHER)
    point = os.path.join(setup["workdir"], "lr0.1_s0")
    sweep = subprocess.Popen([sys.executable, "-m", "shared.sweep", f"--config={setup['table']()}",
                              f"--workdir={setup['workdir']}", "--only=lr0.1_s0",
                              f"--launcher={sys.executable} {launcher}"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: os.path.exists(os.path.join(point, "pid"))), sweep.stderr.read()
        time.sleep(0.2)
        with open(os.path.join(point, "pid")) as f:
            child = int(f.read())
        assert _alive(child)
        sweep.send_signal(getattr(signal, f"SIG{signame}"))
        out, err = sweep.communicate(timeout=60)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert _wait_for(lambda: not _alive(child), timeout=20), "the point outlived its sweep"
    if signame == "KILL":
        assert sweep.returncode == -signal.SIGKILL and not os.path.exists(os.path.join(point, "saved"))
        return
    code = 128 + getattr(signal, f"SIG{signame}")
    assert sweep.returncode == code, (out, err)
    assert err.strip().splitlines() == [f"shared.sweep: interrupted by SIG{signame}: the running points saved their "
                                        "checkpoints; re-run the same command to resume"], err
    with open(os.path.join(point, "saved")) as f:
        assert f.read() == str(int(signal.SIGTERM))  # the point got SIGTERM from the sweep and saved
    ends = [json.loads(line) for line in open(os.path.join(point, "launches.jsonl"))]
    assert ends[-1]["event"] == "end" and ends[-1]["status"] == "stopped" and ends[-1]["returncode"] == 143
