"""CLIPO inside the RL loop: during the head warm-up the head learns and the policy does not; afterwards both do;
the bonus lands on the rewards the advantages see; the head is saved with the checkpoint and restored on resume.
And the :smoke variants of the table and of Track II (DAPO + CLIPO) run end to end through the launcher."""
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import projects.clipo  # noqa: F401
import shared.builtin  # noqa: F401
from projects.clipo.config import add_clipo
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.rewards import RewardManager
from shared.rl.learner import RLLearner
from shared.rl.task import reward_specs
from shared.data.examples import load_task

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
B, G = 4, 4
MIXED = np.tile([True, True, False, True], B)  # every group: 3 correct, 1 incorrect -> 3 valid anchors


def config(steps, warmup):
    c = base_config()
    c.task = "rl"
    c.model.vocab_size, c.model.d_model, c.model.n_layers = 384, 32, 1
    c.model.n_heads, c.model.n_kv_heads, c.model.head_dim, c.model.d_ff = 2, 2, 16, 64
    c.model.dtype, c.model.remat = "float32", "none"
    c.mesh.preset = "cpu_1"
    c.rl.task = "rl/tinygsm_sym"
    c.rl.prompts_per_step, c.rl.group_size, c.rl.max_new_tokens, c.rl.mini_batches = B, G, 6, 2
    c.train.steps, c.train.log_every, c.train.checkpoint_every = steps, 1, 1
    c.train.progress, c.train.async_checkpoint = False, False
    c.optim.lr, c.optim.schedule, c.optim.warmup_steps = 1e-2, "constant", 1
    add_clipo(c, mode="trained", proj_dim=8, warmup_steps=warmup)
    c.lock()
    return c


def learner_with_mixed_groups(c, workdir, snapshots):
    tokenizer = build_tokenizer(c.data, None, c.model.vocab_size)
    train = load_task(c.rl.task, "train", 32, 0)
    learner = RLLearner(c, workdir, tokenizer, train, {}, RewardManager(reward_specs(c)))
    clipo = learner.rl_hooks[0]
    learner.correct = lambda scored: MIXED  # a random policy solves nothing; CLIPO needs mixed groups
    run_hooks = learner.run_reward_hooks

    def spy(step, scored):
        rewards = scored.rewards.copy()
        metrics = run_hooks(step, scored)
        snapshots.append({"step": step, "head": np.asarray(clipo.w),
                          "policy": jax.tree.map(np.array, jax.device_get(learner.trainer.params)),
                          "bonus": scored.rewards - rewards})
        return metrics

    learner.run_reward_hooks = spy
    return learner, clipo


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_head_warmup_trains_the_head_only_then_both_and_resumes(tmp_path):
    snapshots = []
    learner, clipo = learner_with_mixed_groups(config(3, warmup=2), str(tmp_path), snapshots)
    head0 = np.asarray(clipo.w)
    policy0 = jax.tree.map(np.array, jax.device_get(learner.trainer.params))
    learner.fit()
    final_policy = jax.tree.map(np.array, jax.device_get(learner.trainer.params))
    learner.close()
    heads = [s["head"] for s in snapshots]
    assert not np.array_equal(heads[0], head0) and not np.array_equal(heads[1], heads[0])  # a step per RL step
    assert same(snapshots[0]["policy"], policy0) and same(snapshots[2]["policy"], policy0)  # held in warm-up
    assert not same(final_policy, policy0)                                                # updated at step 3
    for s in snapshots:  # bonus on the valid anchors only, within the clamp
        assert np.all(s["bonus"][~MIXED] == 0) and np.all((s["bonus"][MIXED] < 0) & (s["bonus"][MIXED] >= -0.5))
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    frozen = {r["step"]: r["rl/policy_frozen"] for r in rows if "rl/policy_frozen" in r}
    assert frozen == {1: 1.0, 2: 1.0, 3: 0.0}
    assert all(r["clipo/valid_anchor_frac"] == 0.75 for r in rows if "clipo/head_loss" in r)

    saved = np.load(tmp_path / "clipo_head.npz")
    assert int(saved["step"]) == 3 == clipo.step
    np.testing.assert_array_equal(saved["w"], np.asarray(clipo.w))
    resumed, clipo_again = learner_with_mixed_groups(config(4, warmup=2), str(tmp_path), [])
    assert resumed.start_step == 3
    resumed.rl_hooks[0].on_fit_start(resumed)
    np.testing.assert_array_equal(np.asarray(clipo_again.w), saved["w"])
    resumed.close()


SMOKE_KEYS = {
    "tinygsm_sym_table": ("tgs/id_greedy", "tgs/id_greedy_before", "tgs/sym_pass@2", "tgs/id_pw_rate",
                          "tgs/robust_greedy", "clipo/head_loss", "rl/policy_frozen"),
    "clipo_qwen_math": ("clipo/head_loss", "rl/policy_frozen", "rl/dynamic_sampling_batches"),  # DAPO + CLIPO
}


@pytest.mark.parametrize("name", sorted(SMOKE_KEYS))
def test_smoke_variants_run_end_to_end(tmp_path, name):
    workdir = str(tmp_path / name)
    cmd = [sys.executable, "-m", "shared.launch", f"--config=experiments/clipo/{name}.py:smoke", f"--workdir={workdir}"]
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    for key in SMOKE_KEYS[name]:
        assert key in summary, key
    assert summary["steps"] == 2
    assert os.path.exists(os.path.join(workdir, "clipo_head.npz"))
