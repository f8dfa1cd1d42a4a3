"""The search self-play game on shared/agent's loop (ssp.md A.5, D.3), and the task "ssp/selfplay".

One step (Game.play), for B answers a*_i from the pool D with hop counts h_i:
    1. proposer episodes: "propose : answer a* hops h ." with the search tool (<= agent.max_turns turns);
    2. validity: rule filters, then the RAG check (config.ssp.rag: the policy reader = the policy in solver mode
       with the materials as one information block and no tool, greedy; the oracle reader; none);
       oracle labels of every question from the KB (metrics only: precision/recall of the filter);
    3. solver questions: the valid ones, the invalid slots filled from the replay buffer;
    4. solver episodes: G = agent.roles.solver.group_size per question, with the tool; reward = exact match (A.2);
    5. proposer reward: 1 - (solver success on its question) if valid, else ssp.invalid_reward;
       the valid questions (with their success) join the buffer, cleared every ssp.replay_reset_every steps;
    6. the learner updates on both roles' episodes in one batch, each role with its own estimator
       (proposer REINFORCE A = R, solver GRPO), tool tokens masked out (shared/agent).
Frozen roles (solver_only / proposer_only arms): that role's episodes come from the warm-start weights, kept as a
copy from the first step (reloaded from train.init_from or <workdir>/sft on resume), and are not trained.
The supervised arm skips 1-3 and 5: its solver questions are labelled QA (rl/ssp_qa train).

Evaluation (Game.evaluate, every rl.eval_every steps and before RL): greedy solver episodes with the tool on the
held-out QA (answers outside D), accuracy per hop count: eval/acc_h1, eval/acc_h2, eval/acc_h3, eval/acc_mean.
"""
from __future__ import annotations

import random
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from projects.ssp import game as G
from projects.ssp import kb as kb_lib
from projects.ssp.data import env_of, ssp_qa
from projects.ssp.prompts import last_answer, proposer_prompt, reader_prompt, search_queries, solver_prompt
from shared.agent.episodes import Episode, SingleTurn
from shared.agent.learner import Game, run_agent_task
from shared.agent.roles import RoleBatch
from shared.agent.search import SearchEnvironment, SearchTool


def reinforce_advantages(rewards, mask):
    """REINFORCE without a baseline (A.4: the proposer's estimator, n = 1): A = R on every policy token."""
    mask = jnp.asarray(mask, jnp.float32)
    rewards = jnp.asarray(rewards, jnp.float32)
    r = rewards.sum(axis=1) if rewards.ndim == 2 else rewards
    return r[:, None] * mask


def episode_text(episode: Episode) -> str:
    """Everything after the prompt as text: policy turns and the observations between them."""
    parts = []
    for turn in episode.turns:
        parts.append(turn.text)
        if turn.observation is not None:
            parts.append(turn.observation)
    return " ".join(parts)


def _mean(xs) -> float:
    xs = list(xs)
    return float(np.mean(xs)) if xs else 0.0


class SearchSelfPlay(Game):
    def __init__(self, config):
        self.config = config
        s = config.ssp
        self.s = s
        self.env = env_of(kb_options_of(config))
        self.tool = SearchTool(self.env.index, k=int(s.top_k))
        self.rules = G.Rules(int(s.min_chars), int(s.max_chars), int(s.min_words), int(s.min_searches))
        self.buffer = G.ReplayBuffer(int(s.replay_reset_every), float(s.replay_max_success))
        self.oracle_reader = G.OracleReader()
        self.frozen = None   # the warm-start rollout params of a frozen role (solver_only / proposer_only)
        # running counts since the start of the run (kept across a resume): the filter's precision/recall over every step,
        # what a table reads at the end (one step's values are noisy and undefined when nothing passes the rules)
        self.totals = {"accepted": 0, "accepted_oracle_valid": 0, "ruled_oracle_valid": 0}

    # ------------------------------------------------------------------ checkpointed with the run
    def get_state(self) -> dict:
        """The replay buffer and the running filter counts: a resumed run goes on as an uninterrupted one."""
        return {"buffer": self.buffer.state(), "totals": dict(self.totals)}

    def set_state(self, state: dict) -> None:
        self.buffer.load_state(state["buffer"])
        self.totals = {k: int(state["totals"][k]) for k in self.totals}

    # ------------------------------------------------------------------ params per role
    def _frozen_params(self, learner):
        if self.frozen is None:
            if learner.start_step == 0:  # the first call comes in step 1, before any update
                self.frozen = jax.tree.map(jnp.copy, learner.rollout_params())  # before the first update
            else:
                self.frozen = warm_start_rollout_params(learner)
        return self.frozen

    def _run(self, learner, role: str, envs, examples, key, greedy=False, frozen=False) -> list[Episode]:
        if not frozen:
            return learner.run_episodes(envs, examples, role, key, greedy=greedy)
        return learner.episode_sampler.run(self._frozen_params(learner), envs, examples,
                                           learner.turn_params(role, greedy), key, role=role)

    # ------------------------------------------------------------------ the RAG reader
    def policy_reader(self, learner, key, frozen: bool):
        def read(questions: Sequence[str], materials: Sequence[Sequence[str]]) -> list[str | None]:
            prompts = [reader_prompt(q, m) for q, m in zip(questions, materials)]
            # in calls of ssp.reader_rows: its one long prompt (up to a 1,024-token chunk) is attended densely
            rows, answers = int(self.s.reader_rows) or len(prompts), []
            for start in range(0, len(prompts), max(rows, 1)):
                chunk = prompts[start:start + rows]
                eps = self._run(learner, "reader", [SingleTurn(p) for p in chunk], chunk, key, greedy=True,
                                frozen=frozen)
                answers += [last_answer(e.text) for e in eps]
            return answers
        return read

    # ------------------------------------------------------------------ one step
    def play(self, learner, examples: list[dict], rng) -> list[RoleBatch]:
        s = self.s
        step = int(getattr(learner, "step", 0))
        k_prop, k_read, k_solve = jax.random.split(rng, 3)
        py_rng = random.Random(int(self.config.seed) * 1_000_003 + step)
        batches, metrics = [], {}
        if s.questions == "supervised":
            questions = [(e["question"], e["answer"], None) for e in examples]
        else:
            prop_eps, questions, metrics = self.propose(learner, examples, k_prop, k_read, py_rng)
        solver_eps, success, dummy = self.solve(learner, questions, k_solve, examples)
        if s.questions != "supervised":
            by_proposer = {}
            for (q, a, i), rate in zip(questions, success):
                if i is not None:
                    by_proposer[i] = rate
            rewards = []
            for i, ep in enumerate(prop_eps):
                valid = i in by_proposer
                ep.reward = G.proposer_reward(valid, by_proposer.get(i, 0.0), float(s.invalid_reward),
                                              str(s.proposer_reward))
                rewards.append(ep.reward)
            self.buffer.add([{"question": q, "answer": a, "success": rate}
                             for (q, a, i), rate in zip(questions, success) if i is not None])
            metrics["proposer_reward"] = _mean(rewards)
            metrics["fresh_success"] = _mean(by_proposer.values())
            batches.append(RoleBatch("proposer", prop_eps, {k: v for k, v in metrics.items()}))
        self.buffer.end_step(step)
        solver_metrics = {"success": _mean(success), "searches": _mean(len(search_queries(episode_text(e)))
                                                                       for e in solver_eps),
                          "replay_size": float(len(self.buffer)), "dummy_group": float(dummy)}
        batches.append(RoleBatch("solver", solver_eps, solver_metrics))
        return batches

    def propose(self, learner, examples, k_prop, k_read, py_rng):
        s = self.s
        envs = [SearchEnvironment(self.tool, proposer_prompt(e["answer"], int(e["hops"]))) for e in examples]
        eps = self._run(learner, "proposer", envs, examples, k_prop, frozen=not learner.role("proposer").train)
        texts = [episode_text(e) for e in eps]
        answers = [e["answer"] for e in examples]
        reader = {"policy": self.policy_reader(learner, k_read, frozen=not learner.role("solver").train),
                  "oracle": self.oracle_reader, "none": None}[str(s.rag)]
        checks = G.validate_batch(texts, answers, reader, rules=self.rules, n_distractors=int(s.n_distractors),
                                  rng=py_rng)
        oracle = [q is not None and self.env.kb.is_valid(kb_lib.parse_question(q), a)
                  for q, a in zip([c["question"] for c in checks], answers)]
        valid = [i for i, c in enumerate(checks) if c["valid"]]
        ruled = [i for i, c in enumerate(checks) if c["reason"] in ("ok", "rag")]   # passed the rule filters
        # fill the slots of invalid proposals from the buffer (their proposers keep reward invalid_reward)
        questions = [(checks[i]["question"], answers[i], i) for i in valid]
        questions += [(x["question"], x["answer"], None) for x in self.buffer.sample(len(eps) - len(valid), py_rng)]
        passed_rag, oracle_ok = [i in valid for i in ruled], [oracle[i] for i in ruled]
        tp = sum(p and o for p, o in zip(passed_rag, oracle_ok))
        t = self.totals
        t["accepted"] += sum(passed_rag)
        t["accepted_oracle_valid"] += tp
        t["ruled_oracle_valid"] += sum(oracle_ok)
        nll = [-np.sum(e.logprobs) / max(e.policy_tokens, 1) for e in eps]
        paths = [kb_lib.parse_question(c["question"]) if c["question"] else None for c in checks]
        metrics = {
            "valid_rate": len(valid) / len(eps),
            "rule_pass_rate": len(ruled) / len(eps),
            "oracle_valid_rate": _mean(oracle),                       # of all proposals
            "train_oracle_invalid_rate": _mean(not oracle[i] for i in valid),   # of the questions the solver gets
            "filter_precision": tp / max(sum(passed_rag), 1),         # RAG-accepted that are oracle-valid
            "filter_recall": tp / max(sum(oracle_ok), 1),             # oracle-valid (rule-passing) it accepts
            "searches": _mean(len(search_queries(t)) for t in texts),
            "hops": _mean(len(p.hops) for p in paths if p is not None),
            "parsed_rate": _mean(p is not None for p in paths),
            "entropy": _mean(nll),                                    # per-token NLL of sampled tokens (T = 1)
            "replayed": float(len(questions) - len(valid)),
            "run_filter_precision": t["accepted_oracle_valid"] / max(t["accepted"], 1),
            "run_filter_recall": t["accepted_oracle_valid"] / max(t["ruled_oracle_valid"], 1),
            "run_oracle_invalid_rate": (t["accepted"] - t["accepted_oracle_valid"]) / max(t["accepted"], 1),
        }
        for reason in ("no_question", "length", "answer_in_question", "no_information", "few_searches",
                       "repeated_query", "rag"):
            metrics[f"reject/{reason}"] = _mean(c["reason"] == reason for c in checks)
        return eps, questions, metrics

    def solve(self, learner, questions, key, examples):
        """Solver episodes, group-contiguous; success rate per question. With no question at all (every proposal
        invalid and the buffer empty) one group on a proposer prompt's answer-free question is played with reward
        0 for all, so GRPO's advantage is 0 ("dummy padding")."""
        group = int(learner.role("solver").group_size)
        dummy = not questions
        if dummy:
            questions = [(f"what is the mentor of {examples[0]['answer']} ?", "", None)]
        envs, exs = [], []
        for q, a, _ in questions:
            for _ in range(group):
                envs.append(SearchEnvironment(self.tool, solver_prompt(q)))
                exs.append({"question": q, "answer": a})
        eps = self._run(learner, "solver", envs, exs, key, frozen=not learner.role("solver").train)
        for ep, ex in zip(eps, exs):
            ep.reward = 0.0 if dummy else G.solver_reward(episode_text(ep), ex["answer"], int(self.s.max_answer_tags))
        rewards = np.array([e.reward for e in eps]).reshape(len(questions), group)
        return eps, ([] if dummy else rewards.mean(axis=1).tolist()), dummy

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, learner, examples) -> dict:
        if not examples:
            return {}

        def run(envs, chunk):
            return learner.run_episodes(envs, chunk, "solver", jax.random.key(0), greedy=True)

        eps, correct = solver_episodes(run, self.tool, examples, int(self.s.eval_rows), int(self.s.max_answer_tags))
        out = {}
        for h in sorted({int(e["hops"]) for e in examples}):
            out[f"acc_h{h}"] = _mean(c for c, e in zip(correct, examples) if int(e["hops"]) == h)
        out["acc_mean"] = _mean(out.values())
        out["searches"] = _mean(len(search_queries(episode_text(ep))) for ep in eps)
        return out


def solver_episodes(run, tool, examples: Sequence[dict], rows: int, max_answer_tags: int):
    """(episodes, right or wrong) of solver episodes with the search tool on labelled QA ({"prompt", "answer"}),
    run by `run(envs, examples) -> episodes` in calls of `rows` episodes (one KV cache per call)."""
    eps = []
    for start in range(0, len(examples), rows):
        chunk = examples[start:start + rows]
        eps += run([SearchEnvironment(tool, e["prompt"]) for e in chunk], chunk)
    correct = [G.solver_reward(episode_text(ep), e["answer"], max_answer_tags) == 1.0 for ep, e in zip(eps, examples)]
    return eps, correct


def kb_options_of(config) -> dict:
    s = config.ssp
    return {"kb_seed": int(s.kb_seed), "kb_sizes": dict(s.kb_sizes.to_dict() if hasattr(s.kb_sizes, "to_dict")
                                                         else s.kb_sizes), "pool_size": int(s.pool_size)}


def warm_start_rollout_params(learner):
    """The warm-start weights as rollout params, for a frozen role after a resume: train.init_from, else the run's
    own SFT warm start (<workdir>/sft)."""
    import os

    from shared.train.tasks import params_initializer, run_params

    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
                            learner.actor.params)
    init = params_initializer(learner.config)
    params = init(abstract) if init is not None else run_params(os.path.join(learner.workdir, "sft"), abstract)
    return learner.rollout._cast(params) if hasattr(learner.rollout, "_cast") else params


def train_examples(config) -> list[dict]:
    """The proposer's prompts (answers of D x hop counts), or labelled QA for the supervised arm."""
    s = config.ssp
    if s.questions == "supervised":
        return ssp_qa("train", int(config.rl.n_train), int(config.seed), hops=list(s.hops), **kb_options_of(config))
    env = env_of(kb_options_of(config))
    return [{"prompt": proposer_prompt(a, h), "answer": a, "hops": h} for a in env.pool for h in s.hops]


def selfplay_task(config, workdir: str) -> dict:
    s = config.ssp
    evals = ssp_qa("test", int(s.eval_per_hop) * len(s.hops), 0, hops=list(s.hops), **kb_options_of(config))
    return run_agent_task(config, workdir, SearchSelfPlay(config), train_examples(config), evals)
