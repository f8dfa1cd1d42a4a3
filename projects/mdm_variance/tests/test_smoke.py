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
