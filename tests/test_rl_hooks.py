"""RL hooks (shared.rl.learner.RLHook): pooled hidden states reach the hook, its reward bonus reaches the
advantages, frozen steps leave the policy untouched, start/end metrics reach the summary, and a run whose first
steps were frozen resumes at the right RL step."""
import json
import os

import jax
import numpy as np

import shared.builtin  # noqa: F401
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.registry import HOOKS, REWARDS
from shared.rewards import RewardManager
from shared.rl.learner import RLHook, RLLearner, ScoredBatch
from shared.train import Hook
from shared.model.sampler import Rollout
from shared.data.examples import load_task

B, G = 8, 8


def digit_count(prompts, completions, **columns):
    return [float(sum(c.isdigit() for c in text)) for text in completions]


if "test/digit_count" not in REWARDS:
    REWARDS.register("test/digit_count", digit_count)


def hooked_config(steps):
    c = base_config()
    c.task = "rl"
    c.model.vocab_size, c.model.d_model, c.model.n_layers = 384, 32, 1
    c.model.n_heads, c.model.n_kv_heads, c.model.head_dim, c.model.d_ff = 2, 2, 16, 64
    c.model.dtype, c.model.remat = "float32", "none"
    c.mesh.preset = "cpu_1"
    c.rl.task = "rl/arithmetic"
    c.rl.prompts_per_step, c.rl.group_size, c.rl.max_new_tokens = B, G, 6
    c.rl.mini_batches = 2  # the first optimizer step runs at warm-up lr 0
    c.rl.rewards = [("test/digit_count", 1.0)]
    c.train.steps, c.train.log_every, c.train.checkpoint_every = steps, 1, 1
    c.train.progress, c.train.async_checkpoint = False, False
    c.train.hooks = ["test/rl_probe"]
    c.optim.lr, c.optim.schedule, c.optim.warmup_steps = 1e-2, "constant", 1
    return c


def make_learner(config, workdir):
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    train = load_task(config.rl.task, "train", 64, 0)
    return RLLearner(config, workdir, tokenizer, train, {}, RewardManager(list(config.rl.rewards)))


def params_copy(learner):
    return jax.tree.map(np.array, jax.device_get(learner.trainer.params))


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@HOOKS.register("test/rl_probe")
class Probe(RLHook):
    """Holds the policy for the first two steps and gives the first rollout of every group a +1 bonus."""

    needs_hidden = True
    log: list = []

    def freezes_policy(self, step):
        return step <= 2

    def on_fit_start(self, learner):
        Probe.log.append(("start", learner.start_step, params_copy(learner)))
        return {"probe/started": float(learner.start_step)}

    def on_rewards(self, learner, step, scored, rng):
        before = scored.rewards.copy()
        scored.rewards[::G] += 1.0
        Probe.log.append(("rewards", step, params_copy(learner), scored.rollout.hidden, before,
                          scored.rewards.copy(), rng.random()))
        return {"probe/bonus_total": float(scored.rewards.sum() - before.sum())}

    def on_fit_end(self, learner):
        Probe.log.append(("end", learner.config.train.steps, params_copy(learner)))
        return {"probe/ended": 1.0}


def test_hook_sees_hidden_shapes_rewards_and_holds_the_policy(tmp_path):
    Probe.log.clear()
    learner = make_learner(hooked_config(3), str(tmp_path))
    advantages = {}
    build_batch = learner.build_batch

    def spy(scored, **kwargs):
        batch, times = build_batch(scored, **kwargs)
        advantages[len(advantages)] = (batch["advantages"], scored.rewards.copy())
        return batch, times

    learner.build_batch = spy
    summary = learner.fit()
    learner.close()

    start, *steps, end = Probe.log
    assert start[0] == "start" and [s[1] for s in steps] == [1, 2, 3] and end[0] == "end"
    for _, _, _, hidden, _, _, _ in steps:
        assert hidden.shape == (B * G, 32) and np.isfinite(hidden).all() and hidden.std() > 0
    initial = start[2]
    assert same(steps[0][2], initial) and same(steps[1][2], initial) and same(steps[2][2], initial)
    assert not same(end[2], initial)                          # only step 3 updated the policy
    assert int(learner.trainer.state["step"]) == learner.updates_per_step
    assert len({s[6] for s in steps}) == 3                    # a fresh rng per step

    assert list(advantages) == [0]                            # frozen steps build no batch
    adv, shaped = advantages[0]
    np.testing.assert_array_equal(shaped, steps[2][5])        # the advantages saw the bonus
    mask = np.abs(adv).sum(1) > 0
    grouped = shaped.reshape(B, G)
    expected = ((grouped - grouped.mean(1, keepdims=True)) / (grouped.std(1, ddof=1, keepdims=True) + 1e-6))
    expected = expected.reshape(-1)
    np.testing.assert_allclose(adv[mask, 0], expected[mask], rtol=1e-4, atol=1e-4)

    rows = [json.loads(line) for line in open(os.path.join(tmp_path, "metrics.jsonl"))]
    by_step = {r["step"]: r for r in rows if "rl/policy_frozen" in r}
    assert [by_step[s]["rl/policy_frozen"] for s in (1, 2, 3)] == [1.0, 1.0, 0.0]
    assert "train/loss" not in by_step[1] and "train/loss" in by_step[3]
    assert by_step[3]["probe/bonus_total"] == B
    # rl/reward_mean is the task reward before the hook; rl/shaped_reward_mean after it.
    assert np.isclose(by_step[3]["rl/reward_mean"], steps[2][4].mean())
    assert np.isclose(by_step[3]["rl/shaped_reward_mean"] - by_step[3]["rl/reward_mean"], 1.0 / G)
    assert summary["probe/started"] == 0.0 and summary["probe/ended"] == 1.0


def test_resume_after_frozen_steps_continues_at_the_checkpointed_rl_step(tmp_path):
    Probe.log.clear()
    learner = make_learner(hooked_config(2), str(tmp_path))   # both steps frozen: no optimizer step at all
    learner.fit()
    learner.close()
    again = make_learner(hooked_config(3), str(tmp_path))
    assert int(again.trainer.state["step"]) == 0 and again.start_step == 2
    assert again.prompts.get_state() == {"epoch": 0, "index": 2 * B}
    summary = again.fit()
    again.close()
    assert summary["probe/started"] == 2.0
    assert [entry[1] for entry in Probe.log if entry[0] == "rewards"] == [1, 2, 3]


def test_dynamic_sampling_keeps_the_hidden_rows_of_the_chosen_groups():
    g, t, d = 2, 3, 4

    def batch(offset):
        n = 2 * g
        rollout = Rollout(prompt_tokens=np.zeros((n, 2), np.int32), prompt_lengths=np.ones(n, np.int32),
                          tokens=np.zeros((n, t), np.int32), mask=np.ones((n, t), np.float32),
                          lengths=np.full(n, t, np.int32), logprobs=np.zeros((n, t), np.float32),
                          finished=np.ones(n, bool), prompt_index=np.arange(n) // g,
                          hidden=offset + np.arange(n * d, dtype=np.float32).reshape(n, d),
                          texts=[f"{offset}:{i}" for i in range(n)])
        return ScoredBatch(rollout, np.arange(n, dtype=np.float32), {}, [{"p": offset}, {"p": offset + 1}])

    first, second = batch(0), batch(100)
    merged = RLLearner._merge([(second, 1), (first, 0)], informative=2, g=g)
    np.testing.assert_array_equal(merged.rollout.hidden,
                                  np.concatenate([second.rollout.hidden[2:4], first.rollout.hidden[0:2]]))
    assert merged.rollout.texts == ["100:2", "100:3", "0:0", "0:1"]


def test_dynamic_sampling_merges_refills_from_other_prompt_buckets_and_completion_widths():
    """A refill batch in another prompt-length bucket: prompts left-padded, completions right-padded (mask 0) to
    the widest; every row keeps its own tokens at the end of its prompt / start of its completion."""
    g, pad = 2, 9

    def batch(width, t, fill):
        n = 2 * g
        prompt = np.full((n, width), pad, np.int32)
        prompt[:, -1] = fill
        rollout = Rollout(prompt_tokens=prompt, prompt_lengths=np.ones(n, np.int32),
                          tokens=np.full((n, t), fill, np.int32), mask=np.ones((n, t), np.float32),
                          lengths=np.full(n, t, np.int32), logprobs=np.full((n, t), -1.0, np.float32),
                          finished=np.ones(n, bool), prompt_index=np.arange(n) // g, hidden=None,
                          texts=[""] * n)
        return ScoredBatch(rollout, np.zeros(n, np.float32), {}, [{}, {}])

    narrow, wide = batch(width=64, t=3, fill=1), batch(width=128, t=5, fill=2)
    merged = RLLearner._merge([(narrow, 0), (wide, 1)], informative=2, g=g, pad_id=pad).rollout
    assert merged.prompt_tokens.shape == (4, 128) and merged.tokens.shape == (4, 5)
    np.testing.assert_array_equal(merged.prompt_tokens[:, -1], [1, 1, 2, 2])
    assert (merged.prompt_tokens[:2, :-1] == pad).all()
    np.testing.assert_array_equal(merged.tokens[:2], [[1, 1, 1, pad, pad]] * 2)
    np.testing.assert_array_equal(merged.mask[:2], [[1, 1, 1, 0, 0]] * 2)
    np.testing.assert_array_equal(merged.logprobs[:2], [[-1, -1, -1, 0, 0]] * 2)
    np.testing.assert_array_equal(merged.mask[2:], np.ones((2, 5)))


@HOOKS.register("test/plain_trainer_hook")
class PlainHook(Hook):
    pass


def test_sft_warm_start_keeps_trainer_hooks_and_drops_rl_hooks():
    from shared.rl.task import sft_warmup_config

    c = base_config()
    c.task = "rl"
    c.rl.warmup_sft_steps = 10
    c.train.hooks = ["test/rl_probe", "test/plain_trainer_hook"]
    assert list(sft_warmup_config(c).train.hooks) == ["test/plain_trainer_hook"]
