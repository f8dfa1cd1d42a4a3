"""The self-play game: one step with a scripted policy (programmatic proposer traces, a solver right on half its
samples, the oracle-following reader) checks rewards, validity, replay filling and the filter's metrics by hand;
then the smoke config runs one real step of the agent loop on 8 CPU devices."""
import os
import random

import jax
import numpy as np
import pytest

import projects.ssp  # noqa: F401  registrations
from projects.ssp import game as G
from projects.ssp import kb as K
from projects.ssp.config import agent_group
from projects.ssp.prompts import documents, first_question, last_answer
from projects.ssp.selfplay import SearchSelfPlay, episode_text, reinforce_advantages
from projects.ssp.traces import proposer_trace
from shared.agent.episodes import Episode, Turn, _as_step
from shared.agent.roles import RoleSpec



def smoke_config(**overrides):
    from experiments.ssp.selfplay import get_config

    c = get_config("smoke")
    for key, value in overrides.items():
        node = c
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    c.lock()
    return c


def split_turns(trace: str) -> list[str]:
    """A programmatic trace's policy turns (the text up to each </search>, then the rest); observations dropped."""
    turns, rest = [], trace
    while "</search>" in rest:
        head, rest = rest.split("</search>", 1)
        turns.append(head.split("<information>")[0].split("</information>")[-1] + "</search>")
        rest = rest.split("</information>", 1)[1] if "</information>" in rest else rest
    turns.append(rest)
    return turns


class ScriptedLearner:
    """What SearchSelfPlay uses of an AgentLearner, with scripted policy turns run through the real environments."""

    start_step, step = 0, 1

    def __init__(self, scripts, group):
        self.scripts, self.group = scripts, group
        self.calls = []

    def role(self, name):
        return RoleSpec(name, group_size=self.group if name == "solver" else 1)

    def run_episodes(self, envs, examples, role, key, greedy=False):
        self.calls.append((role, len(envs), greedy))
        eps = []
        for i, (env, ex) in enumerate(zip(envs, examples)):
            prompt = env.reset(ex)
            ep = Episode(prompt=[1], role=role, example=ex, env=env, mask=[1.0], logprobs=[-2.0])
            for text in self.scripts[role](prompt, ex, i):
                obs = _as_step(env.step(text)).observation
                ep.turns.append(Turn(0, 1, text, obs, 0.0, "stop"))
                if obs is None:
                    break
            eps.append(ep)
        return eps


@pytest.fixture(scope="module")
def game():
    c = smoke_config(**{"ssp.rag": "oracle"})
    return SearchSelfPlay(c)


def test_scripted_step(game):
    env, rng = game.env, random.Random(0)
    # five answers with valid programmatic proposals, then one that leaks its answer and one that asks nothing
    examples, traces = [], []
    for a in env.pool:
        made = proposer_trace(env, a, 2, rng)
        if made is not None:
            examples.append({"answer": a, "hops": 2})
            traces.append(made[0])
        if len(examples) == 5:
            break
    leak = env.pool[-1]
    examples += [{"answer": leak, "hops": 1}, {"answer": env.pool[-2], "hops": 1}]
    traces += [f" <search> {leak} </search> <search> x {leak} </search> <question> what is the mentor of {leak} "
               f"in the town ? </question>", " I do not know"]

    def proposer(prompt, ex, i):
        return split_turns(traces[i])

    def solver(prompt, ex, i):     # the first sample of each group is right, the second wrong
        return [f"<search> {ex['question'].split()[-2]} </search>",
                f"<answer> {ex['answer'] if i % 2 == 0 else 'Nobody'} </answer>"]

    learner = ScriptedLearner({"proposer": proposer, "solver": solver}, group=2)
    batches = game.play(learner, examples, jax.random.key(0))
    prop, solv = batches
    assert prop.role == "proposer" and solv.role == "solver"
    texts = [episode_text(e) for e in prop.episodes]
    assert [first_question(t) for t in texts[:5]] == [first_question(t) for t in traces[:5]]
    # five valid proposals (rules pass, the oracle reader recovers a* from their own documents), two invalid
    assert [e.reward for e in prop.episodes] == [0.5] * 5 + [0.0, 0.0]
    assert prop.metrics["valid_rate"] == pytest.approx(5 / 7)
    assert prop.metrics["reject/answer_in_question"] == pytest.approx(1 / 7)
    assert prop.metrics["reject/no_question"] == pytest.approx(1 / 7)
    assert prop.metrics["filter_precision"] == 1.0 and prop.metrics["train_oracle_invalid_rate"] == 0.0
    assert prop.metrics["searches"] == pytest.approx((3 * 5 + 2) / 7)   # 2 hops: 3 searches; the leak: 2
    # the solver got the five valid questions (the buffer was empty: no fill), two samples each, group-contiguous
    assert len(solv.episodes) == 10
    assert [e.reward for e in solv.episodes] == [1.0, 0.0] * 5
    assert solv.metrics["success"] == 0.5
    assert len(game.buffer) == 5
    # the next step fills the two invalid slots from the buffer
    learner.step = 2
    batches = game.play(learner, examples, jax.random.key(1))
    assert len(batches[1].episodes) == 14 and batches[0].metrics["replayed"] == 2.0
    assert len(game.buffer) == 10
    learner.step = 10
    game.play(learner, examples, jax.random.key(2))
    assert len(game.buffer) == 0                                         # cleared after step 10


def test_policy_reader_and_penalty():
    c = smoke_config(**{"ssp.invalid_reward": -0.1})
    game = SearchSelfPlay(c)
    env, rng = game.env, random.Random(1)
    examples, traces = [], []
    for a in env.pool[10:]:
        made = proposer_trace(env, a, 1, rng)
        if made is not None:
            examples.append({"answer": a, "hops": 1})
            traces.append(made[0])
        if len(examples) == 3:
            break

    def reader(prompt, ex, i):      # the policy reader: reads right only for the first question
        q = prompt.split(" <information>")[0].removeprefix("solve : ")
        truth = G.OracleReader.read(q, documents(prompt))
        return [f"<answer> {truth if i == 0 else 'Nobody'} </answer>"]

    learner = ScriptedLearner({"proposer": lambda p, ex, i: split_turns(traces[i]), "reader": reader,
                               "solver": lambda p, ex, i: ["<answer> Nobody </answer>"]}, group=2)
    prop, solv = game.play(learner, examples, jax.random.key(0))
    assert ("reader", 3, True) in learner.calls                          # greedy, one episode per rule-passing one
    assert [e.reward for e in prop.episodes] == [1.0, -0.1, -0.1]       # solver never right: 1 - 0
    assert prop.metrics["reject/rag"] == pytest.approx(2 / 3)
    assert prop.metrics["filter_recall"] == pytest.approx(1 / 3)        # all three are oracle-valid
    assert len(solv.episodes) == 2


def test_reinforce_advantage_is_the_reward():
    mask = np.array([[1, 1, 0, 0], [0, 1, 1, 1]], np.float32)
    token_rewards = np.zeros((2, 4), np.float32)
    token_rewards[0, 1], token_rewards[1, 3] = 0.6, -0.1
    np.testing.assert_allclose(reinforce_advantages(token_rewards, mask), [[0.6, 0.6, 0, 0], [0, -0.1, -0.1, -0.1]],
                               rtol=1e-6)


def test_agent_group_matches_shared_agent_config():
    from shared.agent.learner import agent_config

    assert set(agent_group().keys()) == set(agent_config().keys())


def test_smoke_step_through_the_agent_loop(tmp_path):
    """One real step on the smoke config (random policy, 8 CPU devices): nothing it proposes is valid, so every
    proposer reward is 0, the solver plays the zero-advantage dummy group, and the update's policy loss is 0."""
    from shared.config import validate
    from shared.registry import TASKS

    c = smoke_config(**{"rl.warmup_sft_steps": 0, "train.steps": 1, "ssp.eval_per_hop": 1, "rl.eval_every": 100})
    validate(c, 8)
    summary = TASKS.get("ssp/selfplay")(c, str(tmp_path))
    assert summary["steps"] == 1
    assert summary["rl/role/proposer/valid_rate"] == 0.0 and summary["rl/role/proposer/reward_mean"] == 0.0
    assert summary["rl/role/proposer/episodes"] == 4.0 and summary["rl/role/solver/dummy_group"] == 1.0
    assert summary["train/pg_loss"] == 0.0
    for h in (1, 2, 3):
        assert 0.0 <= summary[f"eval/acc_h{h}"] <= 1.0
    assert os.path.exists(tmp_path / "summary.json")
