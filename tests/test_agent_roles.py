"""shared/agent/roles.py + learner.py: role-specific advantages in one batch equal each estimator applied to its own
rows; the AgentLearner's update batch carries them (GRPO for one role, PPO+GAE with the critic for another, an
untrained role left out), its metrics are role-tagged, and a step updates the policy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.agent import AgentLearner, Game, RoleBatch, RoleLayout, RoleSpec, ScriptedEnvironment, agent_config
from shared.agent.roles import RoleAdvantages, role_advantages, role_specs
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.rl import algorithms as alg


def test_role_advantages_equal_each_estimator_on_its_rows():
    rng = np.random.default_rng(0)
    n, t = 10, 7
    mask = (np.arange(t)[None] < rng.integers(2, t + 1, size=n)[:, None]).astype(np.float32)
    mask[:, 0] = 0.0                                                         # an environment token first
    rewards = rng.normal(size=(n, t)).astype(np.float32) * mask
    values = rng.normal(size=(n, t)).astype(np.float32)
    grpo = RoleSpec("solver", advantage="grpo", group_size=2)
    rf = RoleSpec("proposer", advantage="reinforce++", estimator_options={"gamma": 0.9})
    gae = RoleSpec("checker", advantage="gae", estimator_options={"gamma": 0.998, "lam": 0.95})
    layout = [RoleLayout(grpo, 0, 4), RoleLayout(rf, 4, 7), RoleLayout(gae, 7, 10)]
    out = role_advantages(layout, rewards, mask, {"scale_by_std": True}, values)
    m = jnp.asarray(mask)
    expected_grpo = alg.adv_grpo(jnp.asarray(rewards[:4]).sum(1), 2)[:, None] * m[:4]
    expected_rf = alg.adv_rfpp(jnp.asarray(rewards[4:7]), m[4:7], 0.9)
    expected_gae, returns = alg.adv_gae(jnp.asarray(rewards[7:]), jnp.asarray(values[7:]), m[7:], 0.998, 0.95)
    np.testing.assert_allclose(out.advantages, np.concatenate([expected_grpo, expected_rf, expected_gae]), atol=1e-6)
    # value targets: GAE's returns on its rows, the behaviour values elsewhere
    np.testing.assert_allclose(out.returns[7:], returns, atol=1e-6)
    np.testing.assert_allclose(out.returns[:7], values[:7] * mask[:7], atol=1e-6)
    # not the same as one estimator over the whole batch (GAE whitens within its role)
    whole, _ = alg.adv_gae(jnp.asarray(rewards), jnp.asarray(values), m, 0.998, 0.95)
    assert not np.allclose(whole[7:], expected_gae, atol=1e-3)
    with pytest.raises(ValueError, match="does not tile"):
        role_advantages(layout[:2], rewards, mask, None, values)


def test_role_specs_name_bad_keys():
    c = base_config()
    c.agent = agent_config()
    c.agent.roles = {"solver": dict(advantage="grpo", group_sise=4)}
    with pytest.raises(ValueError, match=r"agent.roles.solver: unknown keys \['group_sise'\]"):
        role_specs(c)
    c.agent.roles = {"solver": dict(advantage="gaee")}
    with pytest.raises(KeyError, match="gaee"):
        role_specs(c)


class TwoRoles(Game):
    """solver: 4 episodes per prompt, 2 turns (a scripted observation between); checker: 4 episodes per prompt whose
    prompt holds one of the solver's first answers; observer: sampled, never trained. Rewards: digits and spaces in
    the text. Every role has 8 rows (one compiled turn program)."""

    def play(self, learner, examples, rng):
        rows = [e for e in examples for _ in range(4)]
        solver = learner.run_episodes([ScriptedEnvironment(e["prompt"], [" ok:"]) for e in rows], rows,
                                      "solver", jax.random.fold_in(rng, 0))
        checker_envs = [ScriptedEnvironment("check " + ep.turns[0].text[:8], []) for ep in solver]
        checker = learner.run_episodes(checker_envs, rows, "checker", jax.random.fold_in(rng, 1))
        observer = learner.run_episodes([ScriptedEnvironment("look", []) for _ in rows], rows, "observer",
                                        jax.random.fold_in(rng, 2))
        for ep in solver + checker + observer:
            ep.reward = float(sum(ch.isdigit() or ch == " " for ch in ep.text))
        return [RoleBatch("solver", solver, {"extra": 1.0}), RoleBatch("checker", checker),
                RoleBatch("observer", observer)]


def toy_config():
    c = base_config()
    c.task = "rl"
    for key, value in dict(vocab_size=384, d_model=32, n_layers=1, n_heads=2, n_kv_heads=2, head_dim=16, d_ff=64,
                           dtype="float32", remat="none").items():
        c.model[key] = value
    c.model.heads = ["lm", "scalar"]          # the critic of the checker's PPO + GAE
    c.mesh.preset = "cpu_1"
    c.rl.prompts_per_step = 2
    c.rl.max_new_tokens = 6
    c.agent = agent_config()
    c.agent.max_turn_tokens = 6
    c.agent.context_slots = 2 * (32 + 6)
    c.agent.chunk_buckets = [32]
    c.agent.roles = {"solver": dict(advantage="grpo", group_size=4, max_turns=2),
                     "checker": dict(advantage="gae", group_size=4, estimator_options={"gamma": 0.998, "lam": 1.0}),
                     "observer": dict(advantage="grpo", group_size=4, train=False)}
    c.train.steps = 1
    c.train.log_every = 1
    c.train.checkpoint_every = 10
    c.train.progress = False
    c.train.async_checkpoint = False
    c.optim.lr = 1e-2
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 0      # the only step has a nonzero learning rate
    return c


def test_learner_batch_has_per_role_advantages_and_role_metrics(tmp_path):
    from shared.data.examples import load_task

    config = toy_config()
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    learner = AgentLearner(config, str(tmp_path), tokenizer, TwoRoles(), load_task("rl/arithmetic", "train", 8, 0))
    assert learner.critic is not None          # the checker's GAE asked for one
    scored, _ = learner.collect(jax.random.key(0))
    # roles in config.agent.roles order (a ConfigDict keeps its keys sorted): checker rows, then solver rows
    assert [(p.role.name, p.start, p.stop) for p in scored.layout] == [("checker", 0, 8), ("solver", 8, 16)]
    batch, _ = learner.build_batch(scored)
    mask = jnp.asarray(batch["mask"])
    token_rewards = jnp.asarray(scored.token_rewards)
    checker, returns = alg.adv_gae(token_rewards[:8], jnp.asarray(batch["old_values"][:8]), mask[:8], 0.998, 1.0)
    solver = alg.adv_grpo(token_rewards[8:].sum(1), 4)[:, None] * mask[8:]
    np.testing.assert_allclose(batch["advantages"], np.concatenate([checker, solver]), atol=1e-5)
    np.testing.assert_allclose(batch["returns"][:8], returns, atol=1e-5)
    assert np.abs(batch["advantages"]).sum() > 0
    # the solver's episodes: the observation " ok:" after a first turn that did not end at EOS is masked out
    seen = 0
    for i in range(8, 16):
        ep_tokens = batch["tokens"][i, :scored.rollout.lengths[i]]
        masked_out = tokenizer.decode(ep_tokens[batch["mask"][i, :len(ep_tokens)] == 0])
        assert masked_out in ("", " ok:")
        seen += masked_out == " ok:"
    assert seen >= 4
    # role-tagged metrics of every role; advantages only for the trained ones
    row = scored.metrics
    for role in ("solver", "checker", "observer"):
        assert f"rl/role/{role}/reward_mean" in row and row[f"rl/role/{role}/episodes"] == 8
    assert row["rl/role/solver/extra"] == 1.0 and 1.0 < row["rl/role/solver/turns_mean"] <= 2.0
    assert row["rl/role/checker/turns_mean"] == 1.0
    assert "rl/role/observer/advantage_mean" not in row and "rl/role/checker/advantage_mean" in row
    np.testing.assert_allclose(row["rl/role/solver/reward_mean"], scored.rewards[8:].mean(), rtol=1e-6)
    # one update of the learner on that batch moves the policy and trains the critic
    before = jax.tree.map(lambda x: np.array(x, copy=True), learner.trainer.params)   # the step donates them
    update = learner.update(batch, jax.random.key(1))
    assert "value_loss" in update and np.isfinite(update["loss"])
    moved = jax.tree.map(lambda a, b: float(np.abs(np.asarray(a) - b).max()), learner.trainer.params, before)
    assert max(jax.tree.leaves(moved)) > 0
    learner.close()


def test_kl_in_the_reward_keeps_the_turn_rewards():
    """With rl.kl_in_reward the learner hands estimate() the episode totals on the last token minus the per-token KL;
    the estimator must get the turn rewards (each on its turn's last token) minus the same KL."""
    from shared.agent.learner import EpisodeBatch

    rng = np.random.default_rng(1)
    n, t = 4, 6
    mask = np.ones((n, t), np.float32)
    mask[:, 2] = 0.0                                                   # an observation token
    token_rewards = np.zeros((n, t), np.float32)
    token_rewards[:, 1] = rng.normal(size=n)                           # turn 1's reward
    token_rewards[:, 5] = rng.normal(size=n)                           # turn 2's + the episode's
    kl = rng.normal(size=(n, t)).astype(np.float32) * mask
    totals = token_rewards.sum(1)
    learner = AgentLearner.__new__(AgentLearner)                        # only what estimate() reads
    role = RoleSpec("a", advantage="reinforce++", estimator_options={"gamma": 0.9})
    learner.estimator = RoleAdvantages({"a": role})
    learner.rl = {}
    scored = EpisodeBatch(None, totals, {}, [], None, token_rewards=token_rewards, layout=[RoleLayout(role, 0, n)])
    shaped = alg.as_token_rewards(jnp.asarray(totals), jnp.asarray(mask)) - kl
    out = learner.estimate(scored, shaped, jnp.asarray(mask), None)
    expected = alg.adv_rfpp(jnp.asarray(token_rewards - kl), jnp.asarray(mask), 0.9)
    np.testing.assert_allclose(out.advantages, expected, atol=1e-5)
    # without the KL (rewards [N]) the token rewards go in as they are
    out = learner.estimate(scored, jnp.asarray(totals), jnp.asarray(mask), None)
    np.testing.assert_allclose(out.advantages, alg.adv_rfpp(jnp.asarray(token_rewards), jnp.asarray(mask), 0.9),
                               atol=1e-5)
    assert scored.metrics["rl/role/a/advantage_abs_mean"] > 0


class Remembering(Game):
    """One role; remembers every step's episode texts and rewards: state a resumed run must carry on (like a replay
    buffer)."""

    def __init__(self):
        self.history = []

    def play(self, learner, examples, rng):
        rows = [e for e in examples for _ in range(4)]
        eps = learner.run_episodes([ScriptedEnvironment(e["prompt"], []) for e in rows], rows, "solver", rng)
        for ep in eps:
            ep.reward = float(sum(ch.isdigit() for ch in ep.text))
        self.history.append({"step": learner.step, "texts": [ep.text for ep in eps]})
        return [RoleBatch("solver", eps)]

    def get_state(self):
        return {"history": self.history}

    def set_state(self, state):
        self.history = [dict(h) for h in state["history"]]


def test_game_state_is_checkpointed_and_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    """Game.get_state goes into each checkpoint's data_state; a run stopped after step 1 and resumed with a fresh
    game gives that game the history of step 1 back, and step 2 then plays what the uninterrupted run played."""
    from shared.data.examples import load_task

    examples = load_task("rl/arithmetic", "train", 8, 0)

    def run(workdir, steps):
        config = toy_config()
        config.model.heads = ["lm"]
        config.agent.roles = {"solver": dict(advantage="grpo", group_size=4, max_turns=1)}
        config.train.steps, config.train.checkpoint_every = steps, 1
        game = Remembering()
        tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
        learner = AgentLearner(config, str(workdir), tokenizer, game, examples)
        resumed_with = [h["step"] for h in game.history]
        learner.fit()
        learner.close()
        return game, resumed_with

    whole, _ = run(tmp_path / "whole", 2)
    run(tmp_path / "parts", 1)
    resumed, resumed_with = run(tmp_path / "parts", 2)
    assert resumed_with == [1]                    # step 1's state came back with the checkpoint
    assert [h["step"] for h in whole.history] == [1, 2]
    assert resumed.history == whole.history       # and step 2 played the same episodes
    assert whole.history[0]["texts"] != whole.history[1]["texts"]
