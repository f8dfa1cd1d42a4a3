"""Runs that never mislabel their results: a run killed after its last checkpoint but before summary.json
re-runs to the same summary (pretrain and RL); SIGTERM / SIGINT in a training loop (pretrain, RL) save the
current step and exit 143 / 130 with one line, and the re-run resumes there."""
import json
import os
import subprocess
import sys

import pytest

import shared.builtin  # noqa: F401
from shared.launch import main
from shared.config import load_config
from shared.registry import TASKS

from conftest import REPO_ROOT as REPO  # noqa: E402

RL = os.path.join(REPO, "experiments/rl/grpo_arithmetic.py:smoke")


def summary_of(workdir):
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def test_pretrain_killed_before_its_summary_reruns_to_the_same_summary(tmp_path):
    config = load_config(os.path.join(REPO, "experiments/quickstart.py:smoke"),
                         ["train.steps=4", "train.eval_every=2", "mesh.preset=cpu_1", "train.progress=false",
                          "train.sample_at_end=''"])
    workdir = str(tmp_path / "run")
    first = TASKS.get("pretrain")(config, workdir)
    os.remove(os.path.join(workdir, "summary.json"))   # killed after the last checkpoint, before the summary
    again = TASKS.get("pretrain")(config, workdir)
    assert again["steps"] == 4 and summary_of(workdir)["steps"] == 4
    for key in ("train/loss", "train/accuracy", "eval/loss", "perf/tokens_per_s"):
        assert again[key] == first[key], key


def test_resumed_rl_run_keeps_its_evaluations_before_rl(tmp_path):
    from tests.test_rl_learner import toy_config
    from shared.rl.task import rl_task

    config = toy_config(2)
    config.rl.n_eval = 4
    config.rl.eval_samples = 0
    workdir = str(tmp_path / "rl")
    first = rl_task(config, workdir)
    os.remove(os.path.join(workdir, "summary.json"))
    again = rl_task(config, workdir)
    before = {k: v for k, v in first.items() if k.endswith("_before")}
    assert before and {k: again[k] for k in before} == before
    for key in ("eval/test_accuracy", "rl/reward_mean", "train/loss"):
        assert again[key] == first[key], key


def launch(workdir, *overrides, config="experiments/quickstart.py:smoke"):
    cmd = [sys.executable, "-m", "shared.launch", f"--config={config}", f"--workdir={workdir}", *overrides]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("name,code", [("TERM", 143), ("INT", 130)])
def test_signal_in_training_saves_the_step_and_exits_cleanly(tmp_path, name, code):
    workdir = str(tmp_path / "run")
    common = ["--config.train.steps=5", "--config.train.checkpoint_every=100", "--config.train.log_every=1"]
    rc, out, err = launch(workdir, *common, "--config.train.kill_at_step=2", f"--config.train.kill_signal={name}",
                          "--config.train.async_checkpoint=false")
    assert rc == code, out + err
    assert "Traceback" not in err
    # the signal came after step 2's check: step 3 is saved, on a line of its own
    assert f"\n[train] SIG{name}: saved step 3 to " in "\n" + out, out
    assert os.path.isdir(os.path.join(workdir, "checkpoints", "3"))
    assert not os.path.exists(os.path.join(workdir, "summary.json"))
    rc, out, err = launch(workdir, *common)
    assert rc == 0, out + err
    assert "(step 3)" in out and summary_of(workdir)["steps"] == 5


def test_sigterm_in_the_rl_loop_saves_the_step_and_resumes(tmp_path):
    workdir = str(tmp_path / "rl")
    common = ["--config.train.steps=4", "--config.rl.warmup_sft_steps=0", "--config.train.checkpoint_every=100",
              "--config.rl.eval_every=100"]
    config = "experiments/rl/grpo_arithmetic.py:smoke"
    rc, out, err = launch(workdir, *common, "--config.train.kill_at_step=1", "--config.train.kill_signal=TERM",
                          config=config)
    assert rc == 143, out + err
    assert "\n[rl] SIGTERM: saved step 2 to " in "\n" + out, out
    rc, out, err = launch(workdir, *common, config=config)
    assert rc == 0, out + err
    assert "steps 2->4" in out
    summary = summary_of(workdir)
    assert summary["steps"] == 4 and "eval/test_accuracy_before" in summary


def test_an_allowed_change_the_checkpoint_cannot_take_is_one_line_naming_the_key(tmp_path):
    workdir = str(tmp_path / "run")
    common = ["--config.train.steps=2", "--mesh=cpu_1"]
    rc, out, err = launch(workdir, *common)
    assert rc == 0, out + err
    rc, out, err = launch(workdir, "--config.train.steps=4", "--mesh=cpu_1", "--config.model.d_model=96",
                          "--allow_config_change=model.d_model,train.steps")
    assert rc == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "model.d_model" in lines[0], err


def test_sigint_in_sft_saves_the_step_and_resumes(tmp_path):
    workdir = str(tmp_path / "sft")
    common = ["--config.train.steps=4", "--config.train.checkpoint_every=100", "--config.train.eval_every=100",
              "--mesh=cpu_1"]
    config = "experiments/rl/sft_arithmetic.py:smoke"
    rc, out, err = launch(workdir, *common, "--config.train.kill_at_step=1", "--config.train.kill_signal=INT",
                          "--config.train.async_checkpoint=false", config=config)
    assert rc == 130, out + err
    assert "Traceback" not in err and "\n[train] SIGINT: saved step 2 to " in "\n" + out, out + err
    rc, out, err = launch(workdir, *common, config=config)
    assert rc == 0, out + err
    assert "(step 2)" in out and summary_of(workdir)["steps"] == 4


def test_a_reward_that_raises_stops_the_rl_run_with_one_line(capsys, tmp_path):
    """rl.reward_errors=raise: the first failing reward ends the run with one line naming the reward and the
    example (a 65-line traceback before), exit 1."""
    from shared.registry import REWARDS

    if "test/raises" not in REWARDS:
        @REWARDS.register("test/raises")
        def raises(prompts, completions, **columns):
            return [float("not a number: " + text) for text in completions]

    workdir = str(tmp_path / "rl")
    capsys.readouterr()
    code = main([f"--config={RL}", f"--workdir={workdir}", "--mesh=cpu_1", "--config.rl.warmup_sft_steps=0",
                 "--config.train.steps=1", "--config.rl.eval_every=100", "--config.rl.n_eval=2",
                 "--config.rl.eval_samples=0", "--config.rl.rewards=[('test/raises', 1.0)]",
                 "--config.rl.reward_errors=raise", "--config.rl.prompts_per_step=2", "--config.rl.group_size=2"])
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    # Progress lines may come before it; the failure itself is one line, the last, with no traceback.
    assert "Traceback" not in err, err
    errors = [line for line in err.strip().splitlines() if line.startswith("error")]
    assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err
    assert errors[0].startswith("error: reward 'test/raises' raised ValueError: could not convert string "
                                "to float: 'not a number: ") and " at example 0 of " in errors[0], errors[0]
