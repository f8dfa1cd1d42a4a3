"""The RL loop: GRPO raises the reward of a toy task; resume; the quick experiment runs end to end."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.registry import REWARDS
from shared.rewards import RewardManager
from shared.rl.learner import RLLearner

from conftest import REPO_ROOT as REPO  # noqa: E402


def digit_fraction(prompts, completions, **columns):
    """Toy dense reward: the fraction of completion characters that are digits."""
    return [sum(c.isdigit() for c in text) / max(1, len(text)) for text in completions]


if "test/digit_fraction" not in REWARDS:
    REWARDS.register("test/digit_fraction", digit_fraction)


def toy_config(steps):
    c = base_config()
    c.task = "rl"
    c.model.vocab_size = 384
    c.model.d_model = 32
    c.model.n_layers = 1
    c.model.n_heads = 2
    c.model.n_kv_heads = 2
    c.model.head_dim = 16
    c.model.d_ff = 64
    c.model.dtype = "float32"
    c.model.remat = "none"
    c.mesh.preset = "cpu_1"
    c.rl.task = "rl/arithmetic"
    c.rl.prompts_per_step = 8
    c.rl.group_size = 8
    c.rl.max_new_tokens = 6
    c.rl.rewards = [("test/digit_fraction", 1.0)]
    c.train.steps = steps
    c.train.log_every = 1
    c.train.checkpoint_every = 5
    c.train.progress = False
    c.train.async_checkpoint = False
    c.optim.lr = 1e-2
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 1
    c.optim.weight_decay = 0.0
    c.seed = 0
    return c


def make_learner(config, workdir):
    from shared.data.examples import load_task

    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    train = load_task(config.rl.task, "train", 64, 0)
    manager = RewardManager(list(config.rl.rewards))
    return RLLearner(config, workdir, tokenizer, train, {}, manager)


def rewards_of(workdir):
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    return {r["step"]: r["rl/reward_mean"] for r in rows if "rl/reward_mean" in r}


def test_grpo_raises_the_reward_of_a_toy_task(tmp_path):
    learner = make_learner(toy_config(25), str(tmp_path))
    learner.fit()
    learner.close()
    rewards = rewards_of(str(tmp_path))
    print("reward by step:", {s: round(r, 3) for s, r in sorted(rewards.items())})
    first = np.mean([rewards[s] for s in (1, 2, 3)])
    last = np.mean([rewards[s] for s in (23, 24, 25)])
    # A random byte-level policy emits digits ~3% of the time; GRPO on this dense reward must lift that a lot.
    assert first < 0.15, rewards
    assert last > first + 0.25, rewards


def test_rl_run_resumes_from_its_checkpoint(tmp_path):
    learner = make_learner(toy_config(5), str(tmp_path))
    learner.fit()
    learner.close()
    again = make_learner(toy_config(7), str(tmp_path))
    assert again.start_step == 5
    assert again.prompts.get_state() == {"epoch": 0, "index": 5 * 8}  # the prompt iterator resumed too
    again.fit()
    again.close()
    assert sorted(rewards_of(str(tmp_path))) == [1, 2, 3, 4, 5, 6, 7]


def test_quick_rl_experiment_smoke_runs_end_to_end(tmp_path):
    workdir = str(tmp_path / "grpo")
    cmd = [sys.executable, "-m", "shared.launch", "--config=experiments/rl/grpo_arithmetic.py:smoke",
           f"--workdir={workdir}"]
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    for key in ("eval/test_accuracy_before", "eval/test_accuracy", "eval/ood_accuracy", "rl/reward_mean",
                "perf/rollout_and_reward_s", "perf/update_s", "train/entropy"):
        assert key in summary, key
    assert os.path.exists(os.path.join(workdir, "sft", "summary.json"))


def flaky_reward(prompts, completions, **columns):
    """Raises whenever a batch holds an addition problem: the manager then scores example by example."""
    if any("+" in p for p in prompts):
        raise RuntimeError("judge timed out")
    return [0.5] * len(prompts)


if "test/flaky" not in REWARDS:
    REWARDS.register("test/flaky", flaky_reward)


def test_reward_errors_policy_zero_counts_failures_and_raise_stops(tmp_path):
    from shared.rewards.core import RewardError
    from shared.rl.task import rl_task

    config = toy_config(1)
    config.rl.rewards = [("test/flaky", 1.0)]
    config.rl.n_eval = 4
    config.rl.eval_samples = 0
    config.rl.reward_errors = "zero"
    summary = rl_task(config, str(tmp_path / "zero"))
    assert summary["reward/test/flaky/errors"] > 0          # counted per function
    assert 0 < summary["rl/reward_mean"] < 0.5               # failing examples scored 0, the others 0.5
    config.rl.reward_errors = "raise"
    with pytest.raises(RewardError, match="test/flaky"):
        rl_task(config, str(tmp_path / "raise"))
