"""The self-play game: one step with a scripted policy (programmatic proposer traces, a solver right on half its
samples, the oracle-following reader) checks rewards, validity, replay filling and the filter's metrics by hand;
then one real step of the agent loop on the smoke config (8 CPU devices) with scripted proposals."""
import os
import random

import jax
import numpy as np
import pytest

import projects.ssp  # noqa: F401  registrations
from projects.ssp import game as G
from projects.ssp.config import agent_group
from projects.ssp.prompts import documents, first_question
from projects.ssp.selfplay import SearchSelfPlay, episode_text, reinforce_advantages
from projects.ssp.traces import proposer_trace
from shared.agent.episodes import Episode, Turn
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
                obs = env.step(text)          # SearchEnvironment / SingleTurn: the observation or None
                ep.turns.append(Turn(0, 1, text, obs, 0.0, "stop"))
                if obs is None:
                    break
            eps.append(ep)
        return eps


@pytest.fixture(scope="module")
def game():
    c = smoke_config(**{"ssp.rag": "oracle"})
    return SearchSelfPlay(c)


def valid_proposals(env, rng, n: int = 5):
    """The first n pool answers with a valid 2-hop programmatic proposal: (examples, proposer traces)."""
    examples, traces = [], []
    for a in env.pool:
        made = proposer_trace(env, a, 2, rng)
        if made is not None:
            examples.append({"answer": a, "hops": 2})
            traces.append(made[0])
        if len(examples) == n:
            break
    return examples, traces


def test_scripted_step(game):
    env, rng = game.env, random.Random(0)
    # five answers with valid programmatic proposals, then one that leaks its answer and one that asks nothing
    examples, traces = valid_proposals(env, rng)
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


def test_replay_buffer_survives_save_and_restore():
    """The game's state (replay buffer, running filter counts) through JSON into a fresh game: the next step's
    solver batch (the fresh questions + the two slots filled from the buffer) and the buffer after it are the
    uninterrupted game's; a fresh game without the state plays a different batch."""
    import json

    c = smoke_config(**{"ssp.rag": "oracle"})
    played = SearchSelfPlay(c)
    env, rng = played.env, random.Random(1)
    examples, traces = valid_proposals(env, rng)
    examples += [{"answer": env.pool[-2], "hops": 1}, {"answer": env.pool[-3], "hops": 1}]
    traces += [" I do not know", " nothing"]

    def solver(prompt, ex, i):
        return [f"<answer> {ex['answer'] if i % 3 == 0 else 'Nobody'} </answer>"]

    def learner_at(step):
        learner = ScriptedLearner({"proposer": lambda p, ex, i: split_turns(traces[i]), "solver": solver}, group=2)
        learner.step = step
        return learner

    played.play(learner_at(1), examples, jax.random.key(0))
    assert len(played.buffer) == 5 and played.totals["accepted"] == 5
    state = json.loads(json.dumps(played.get_state()))
    restored, fresh = SearchSelfPlay(c), SearchSelfPlay(c)
    restored.set_state(state)
    assert restored.buffer.state() == played.buffer.state() and restored.totals == played.totals

    def solver_batch(game):
        batch = game.play(learner_at(2), examples, jax.random.key(1))[1]
        return [(e.example["question"], e.example["answer"], e.reward) for e in batch.episodes]

    expected = solver_batch(played)
    assert len(expected) == 14                    # 5 fresh questions + 2 from the buffer, 2 samples each
    assert solver_batch(restored) == expected
    assert restored.buffer.state() == played.buffer.state() and len(played.buffer) == 10
    assert restored.totals == played.totals == {k: 2 * v for k, v in state["totals"].items()}
    assert len(solver_batch(fresh)) == 10         # no buffer: the invalid slots stay empty


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
    assert prop.metrics["run_filter_recall"] == pytest.approx(1 / 3) and prop.metrics["run_filter_precision"] == 1.0
    prop, _ = game.play(learner, examples, jax.random.key(1))           # running counts add up over steps
    assert game.totals == {"accepted": 2, "accepted_oracle_valid": 2, "ruled_oracle_valid": 6}
    assert prop.metrics["run_oracle_invalid_rate"] == 0.0
    assert len(solv.episodes) == 2


def test_policy_reader_in_calls_of_reader_rows():
    """ssp.reader_rows splits the reader's greedy episodes into calls (memory); the answers come back in order."""
    c = smoke_config(**{"ssp.reader_rows": 2})
    game = SearchSelfPlay(c)
    examples, traces = valid_proposals(game.env, random.Random(2), n=3)
    questions = [first_question(t) for t in traces]
    materials = [documents(t) for t in traces]

    def reader(prompt, ex, i):      # reads right by content, whatever the row's index within its call
        q = prompt.split(" <information>")[0].removeprefix("solve : ")
        return [f"<answer> {G.OracleReader.read(q, documents(prompt))} </answer>"]

    learner = ScriptedLearner({"reader": reader}, group=1)
    answers = game.policy_reader(learner, jax.random.key(0), frozen=False)(questions, materials)
    assert learner.calls == [("reader", 2, True), ("reader", 1, True)]
    assert answers == [e["answer"] for e in examples]


def test_reinforce_advantage_is_the_reward():
    mask = np.array([[1, 1, 0, 0], [0, 1, 1, 1]], np.float32)
    token_rewards = np.zeros((2, 4), np.float32)
    token_rewards[0, 1], token_rewards[1, 3] = 0.6, -0.1
    np.testing.assert_allclose(reinforce_advantages(token_rewards, mask), [[0.6, 0.6, 0, 0], [0, -0.1, -0.1, -0.1]],
                               rtol=1e-6)


def test_agent_group_matches_shared_agent_config():
    from shared.agent.learner import agent_config

    assert set(agent_group().keys()) == set(agent_config().keys())


def test_one_real_step_with_scripted_proposals(tmp_path):
    """One real step of the agent loop on the smoke config (8 CPU devices, random policy): the proposer's turns are
    scripted (programmatic traces, all valid; their tokens go through the real packing and update), the oracle
    reader checks them, the random solver answers nothing. So every proposer reward is 1 - 0 = 1 and its REINFORCE
    advantage is 1 on every proposer token, the solver's GRPO advantages are 0, and with one on-policy update
    (ratio 1) the token-mean policy loss is minus the proposer's share of the policy tokens."""
    from shared.agent.episodes import Episode, Turn
    from shared.agent.learner import run_agent_task
    from shared.config import validate
    from projects.ssp.selfplay import train_examples

    c = smoke_config(**{"rl.warmup_sft_steps": 0, "train.steps": 1, "ssp.eval_per_hop": 1, "rl.eval_every": 100,
                        "ssp.rag": "oracle", "ssp.hops": [2]})
    validate(c, 8)
    scripted = {}

    class ScriptedProposals(SearchSelfPlay):
        def _run(self, learner, role, envs, examples, key, greedy=False, frozen=False):
            if role != "proposer":
                return super()._run(learner, role, envs, examples, key, greedy, frozen)
            tok, eps = learner.tokenizer, []
            for env, ex in zip(envs, examples):
                ep = Episode(prompt=[tok.bos_id] + tok.encode(env.reset(ex)), role=role, example=ex, env=env)
                for text in split_turns(scripted[ex["answer"]]):
                    start = len(ep.tokens)
                    ids = tok.encode(text)
                    ep.tokens += ids
                    ep.mask += [1.0] * len(ids)
                    ep.logprobs += [-1.0] * len(ids)
                    obs = env.step(text)
                    ep.turns.append(Turn(start, len(ep.tokens), text, obs, 0.0, "stop"))
                    if obs is None:
                        ep.end = "env"
                        break
                    ep.tokens += tok.encode(obs)
                    ep.mask += [0.0] * len(tok.encode(obs))
                    ep.logprobs += [0.0] * len(tok.encode(obs))
                eps.append(ep)
            return eps

    game = ScriptedProposals(c)
    rng = random.Random(0)
    examples = []
    for e in train_examples(c):
        made = proposer_trace(game.env, e["answer"], 2, rng)
        if made is not None and len(scripted) < 64:
            scripted[e["answer"]] = made[0]
            examples.append(e)
    from projects.ssp.data import ssp_qa
    from projects.ssp.selfplay import kb_options_of

    evals = ssp_qa("test", 2, 0, hops=[2], **kb_options_of(c))
    summary = run_agent_task(c, str(tmp_path), game, examples, evals)
    assert summary["steps"] == 1 and summary["rl/role/proposer/episodes"] == 4.0
    assert summary["rl/role/proposer/valid_rate"] == 1.0 and summary["rl/role/proposer/filter_precision"] == 1.0
    assert summary["rl/role/solver/episodes"] == 8.0 and summary["rl/role/solver/dummy_group"] == 0.0
    assert summary["rl/role/solver/success"] == 0.0     # a random policy never writes "<answer> a* </answer>"
    assert summary["rl/role/proposer/reward_mean"] == 1.0
    assert summary["rl/role/proposer/advantage_mean"] == pytest.approx(1.0)
    assert summary["rl/role/solver/advantage_abs_mean"] == 0.0
    prop = summary["rl/role/proposer/policy_tokens_mean"] * 4
    solv = summary["rl/role/solver/policy_tokens_mean"] * 8
    assert summary["train/pg_loss"] == pytest.approx(-prop / (prop + solv), rel=1e-4)
    assert 0.0 <= summary["eval/acc_h2"] <= 1.0 and "eval/acc_h2_before" in summary
    assert os.path.exists(tmp_path / "summary.json")
