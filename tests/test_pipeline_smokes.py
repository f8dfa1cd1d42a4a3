"""A pipeline's `:smoke` runs alone from a fresh clone: its stages, then the runs that read them, as one launch.

tests/test_experiments.py builds and validates every `:smoke`; launching all of them would take most of CI's time
(2-6 min each on 2 cores, mostly compilation), so this file launches the smokes of the pipelines, whose single
runs need earlier runs, and checks that such a run launched alone refuses in one line naming the commands.
"""
import json
import os
import subprocess
import sys

from conftest import REPO_ROOT as REPO  # noqa: E402

PIPELINE = "experiments/proxy_grm/smoke_pipeline.py"


def launch(*args, timeout=1500):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}  # as on a fresh machine
    env["PYTHONPATH"] = REPO
    return subprocess.run([sys.executable, "-m", "shared.launch", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_a_run_that_needs_earlier_runs_says_so_in_one_line(tmp_path):
    workdir = tmp_path / "C"
    result = launch(f"--config={PIPELINE}:grm_C_smoke", f"--workdir={workdir}")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: this GRM arm starts from earlier runs"), result.stderr
    assert f"--config={PIPELINE}:proxy_sft_smoke" in lines[0] and f"--config={PIPELINE}:smoke" in lines[0]
    assert not workdir.exists()  # a launch refused on its input leaves no workdir


def test_the_pipeline_smoke_runs_its_stages_then_the_arm(tmp_path):
    workdir = tmp_path / "pg"
    result = launch(f"--config={PIPELINE}:smoke", f"--workdir={workdir}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for folder in ("stages/proxy", "stages/sft", "C"):
        assert (workdir / folder / "summary.json").exists(), folder
    point = json.loads((workdir / "C" / "summary.json").read_text())
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["sweep/points"] == 3 and summary["C/grm/id_acc"] == point["grm/id_acc"]
    config = json.loads((workdir / "C" / "config.json").read_text())  # the arm read both stages
    assert config["train"]["init_from"] == f"run:{workdir / 'stages' / 'sft'}"
    assert config["proxy_grm"]["proxy_run"] == str(workdir / "stages" / "proxy")
    assert "warm start from" in (workdir / "C" / "log.txt").read_text()
    assert "[done]" in result.stdout and "final metrics" not in result.stdout
    assert (workdir / "results.md").exists() and (workdir / "manifest.json").exists()
