"""The mdm_variance smoke runs through the launcher (subprocesses): the accuracy and variance tasks sharing one
theta0, and the LLaDA-8B-style config's tiny variant on the shared "mdm" task. They run on one CPU device
(--config.mesh.preset=cpu_1) to keep CI short; tests/test_experiments.py validates the configs on cpu_8."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def launch(spec, workdir, *overrides):
    command = [sys.executable, "-m", "shared.launch", f"--config={spec}", f"--workdir={workdir}",
               "--config.mesh.preset=cpu_1", *overrides]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def test_accuracy_and_variance_smoke(tmp_path):
    acc = launch("experiments/mdm_variance/accuracy.py:smoke", tmp_path / "acc", "--config.mdm_variance.method=ppots_mirror")
    assert acc["seeds"] == 2 and len(acc["acc/seeds"]) == 2
    assert 0.0 <= acc["acc/mean"] <= 1.0 and acc["elbo/mean"] > 0
    assert acc["ppots/predicted_ppots_marginal"] < acc["ppots/predicted_uniform_marginal"]
    assert len(os.listdir(tmp_path / "_theta0")) == 2  # theta0 folder + its lock file
    var = launch("experiments/mdm_variance/variance.py:smoke", tmp_path / "var", "--config.mdm_variance.method=ppots_mirror")
    assert len(os.listdir(tmp_path / "_theta0")) == 2  # theta0 reused, not retrained
    assert abs(var["total"] - var["sum"]) <= 0.1 * var["total"]
    assert var["A"] > 0 and var["rho/mean_below_half"] < 0 and var["grad_noise"] > 0


def test_llada_style_sft_smoke(tmp_path):
    summary = launch("experiments/mdm_variance/llada8b_sft.py:smoke", tmp_path / "run")
    assert summary["steps"] == 3 and not summary["diverged"]
    assert 0.0 <= summary["eval/greedy_accuracy"] <= 1.0 and summary["eval/elbo"] > 0


def test_theta0_stage_is_what_the_spec_points_start_from(tmp_path):
    """variance.py:spec's wiring: a "mdm_variance/theta0" stage trains theta0 in its own workdir (with its greedy
    accuracy), and points naming it by mdm_variance.theta0.run train no theta0 of their own; a point of the
    other kind is refused."""
    stage = launch("experiments/mdm_variance/variance.py:theta0_smoke", tmp_path / "stage")
    assert stage["kind"] == "mdm" and stage["steps"] == 2 and 0.0 <= stage["acc/theta0"] <= 1.0
    assert os.path.exists(tmp_path / "stage" / "theta0_params.npz")
    run = f"--config.mdm_variance.theta0.run={tmp_path / 'stage'}"
    var = launch("experiments/mdm_variance/variance.py:spec_smoke", tmp_path / "var", run, "--config.seed=1")
    assert abs(var["total"] - var["sum"]) <= 0.1 * var["total"] and var["A"] > 0
    assert not os.path.exists(tmp_path / "_theta0")  # nothing trained beside the stage
    command = [sys.executable, "-m", "shared.launch", "--config=experiments/mdm_variance/variance.py:spec_acc_smoke",
               f"--workdir={tmp_path / 'arm'}", "--config.mesh.preset=cpu_1", "--config.mdm_variance.method=arm", run]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0 and "holds a mdm theta0; this point needs arm" in result.stderr
