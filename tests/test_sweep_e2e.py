"""`python -m shared.sweep` end to end on the quickstart's two-point learning-rate table (:smoke variant, real
launcher, real training): the results files hold what the points wrote, and a second run launches nothing."""
import csv
import json
import math
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POINTS = {"lr0.003": 0.003, "lr0.01": 0.01}  # get_sweep() of experiments/quickstart.py


def sweep(workdir):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # CPU points, one at a time, whatever GPUs this host has
    proc = subprocess.run([sys.executable, "-m", "shared.sweep", "--config=experiments/quickstart.py:smoke",
                           f"--workdir={workdir}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def read_json(path):
    with open(path) as f:
        return json.load(f)


def launches_logged(point_dir):
    """The sweep appends a "=== <time> <command>" header to the point's log.txt each time it launches it."""
    with open(os.path.join(point_dir, "log.txt")) as f:
        return sum(line.startswith("=== ") for line in f)


def test_quickstart_lr_sweep_writes_results_and_resumes(tmp_path):
    workdir = str(tmp_path)
    out = sweep(workdir)
    assert "2 to run" in out, out

    with open(os.path.join(workdir, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["name"] for r in rows] == list(POINTS)
    for row in rows:
        point_dir = os.path.join(workdir, row["name"])
        assert row["status"] == "finished", row
        assert float(row["optim.lr"]) == POINTS[row["name"]]
        # The override reached the run: its config.json has this point's learning rate.
        assert read_json(os.path.join(point_dir, "config.json"))["optim"]["lr"] == POINTS[row["name"]]
        # Numbers come from the point's own summary.json, at full precision.
        summary = read_json(os.path.join(point_dir, "summary.json"))
        eval_loss = float(row["eval/loss"])
        assert math.isfinite(eval_loss) and eval_loss == summary["eval/loss"]
        assert float(row["train/loss"]) == summary["train/loss"]
        assert row["diverged"] == "False" and summary["steps"] == 6
    # Different learning rates train differently.
    assert rows[0]["train/loss"] != rows[1]["train/loss"]

    markdown = open(os.path.join(workdir, "results.md")).read()
    assert all(name in markdown for name in POINTS) and "eval/loss" in markdown
    with open(os.path.join(workdir, "lr.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    manifest = read_json(os.path.join(workdir, "manifest.json"))
    assert manifest["sweep"] == "lr" and manifest["config_arg"] == "smoke"
    assert {name: p["status"] for name, p in manifest["points"].items()} == dict.fromkeys(POINTS, "finished")

    # Second run: both points are finished, so nothing is launched and the results stay the same.
    out = sweep(workdir)
    assert "0 to run, 2 already finished" in out and "0 launched" in out, out
    assert all(launches_logged(os.path.join(workdir, name)) == 1 for name in POINTS)
    with open(os.path.join(workdir, "results.csv"), newline="") as f:
        again = list(csv.DictReader(f))
    assert [r["eval/loss"] for r in again] == [r["eval/loss"] for r in rows]
