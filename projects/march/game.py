"""MARCH's step (march.md A.4) on shared/agent: Solver -> Proposer -> M Checker audits -> vote -> shared reward, and the
task "march/rl" (SFT warm start on the three roles' traces, then the agent RL loop).

config.march:
  reward             "ztr" (0 / -1, the paper's default), "ztr01" (1 / 0), "err" (-0.1 min(#faults, 13)), or "oracle"
                     (the programmatic fact check: -1 if the answer holds a number the relevant documents do not
                     support, else 0; an upper bound that uses labels). The Checker's reward is always the
                     self-check reward of the response it audited.
  symmetric_checker  True: the Checker's prompt also shows the Solver's response (the confirmation-bias ablation)
  checker_samples    M audits per response (3); the vote is over all M, the last one joins the update
Roles (config.agent.roles): solver and checker trained (checker train=False: the Solver-only arm), proposer sampled
but never trained (A.2). Information asymmetry by construction: the Checker's prompt is built from the documents and
the Proposer's questions only (numfacts.checker_prompt; tests/test_march.py checks it on token ids); the Proposer's
from the query and the answer only.
Metrics per step: rl/role/solver/{halluc_rate, coverage, numbers, self_check_reward, flagged}, rl/role/proposer/
questions, rl/role/checker/{agreement (flagged == hallucinated, per response), confirm_rate (pairs voted correct),
oracle_confirm_rate (pairs whose number is the true value), pair_accuracy, answered}; evaluation (greedy Solver on the
test split): eval/halluc_rate, eval/coverage, eval/numbers_per_response.
"""
from __future__ import annotations

import re

import jax
import numpy as np

from projects.march import numfacts as nf
from projects.march.matching import numbers_match, parse_audit, parse_questions, self_check_reward, vote
from shared.agent import Game, RoleBatch, SingleTurn, run_agent_task
from shared.registry import TASKS

REWARD_KINDS = ("ztr", "ztr01", "err", "oracle")
MAX_QUESTION_CHARS = 120


def true_value(world: dict, question: str) -> int | None:
    """The true answer of a question in the Proposer's templates about the target (None: another form)."""
    truth = world["all_truth"]
    m = re.fullmatch(r"How many ([a-z]+) did (\w+) have in (\d+)\?", question.strip())
    if m and m.group(2) == world["town"] and int(m.group(3)) == world["year"]:
        return truth.get(m.group(1))
    m = re.fullmatch(r"What is ([a-z]+) (plus|minus) ([a-z]+) for (\w+) in (\d+)\?", question.strip())
    if m and m.group(4) == world["town"] and int(m.group(5)) == world["year"] and m.group(1) in truth \
            and m.group(3) in truth:
        a, b = truth[m.group(1)], truth[m.group(3)]
        return a + b if m.group(2) == "plus" else a - b
    return None


def describe_answer(world: dict, answer: str) -> str:
    """A Solver answer next to its documents and the oracle's verdict (for logs and probes): the relevant
    documents marked "*", the true values, each reported number marked ok / unsupported."""
    check = nf.oracle_check(world, answer)
    support = [str(int(x)) for x in nf.supported_numbers(world)]
    marks = " ".join(f"{n}:{'ok' if any(numbers_match(n, s) for s in support) else 'UNSUPPORTED'}"
                     for n in nf.response_numbers(answer))
    docs = "".join(f"  {'*' if d['relevant'] else ' '}[{i + 1}] {d['text']}\n" for i, d in enumerate(world["docs"]))
    return (f"[march eval] {world['town']} {world['year']}, asked {world['asked']}; truth {world['truth']}\n{docs}"
            f"  answer: {answer.strip()!r}\n  numbers: {marks or '-'}; hallucinated={check['hallucinated']} "
            f"coverage={check['coverage']:.2f}")


def checker_prompt_for(example: dict, questions: list[str], response: str, symmetric: bool) -> str:
    """The Checker's prompt: the documents and the questions; the response only in the symmetric ablation."""
    return nf.checker_prompt(nf.docs_block(example["world"]), questions, response if symmetric else None)


class MarchGame(Game):
    def __init__(self, config):
        march = config.march
        self.reward = str(march.reward)
        if self.reward not in REWARD_KINDS:
            raise ValueError(f"march.reward={self.reward!r}: expected one of {', '.join(REWARD_KINDS)}")
        self.symmetric = bool(march.symmetric_checker)
        self.samples = int(march.checker_samples)
        self.eval_print = int(getattr(march, "eval_print", 0))
        if self.samples < 1:
            raise ValueError(f"march.checker_samples={self.samples}: must be >= 1")

    def play(self, learner, examples, rng):
        g = learner.role("solver").group_size
        rows = [e for e in examples for _ in range(g)]
        solver = learner.run_episodes([SingleTurn(e["prompt"]) for e in rows], rows, "solver", jax.random.fold_in(rng, 0))
        proposer_envs = [SingleTurn(nf.proposer_prompt(nf.query_text(e["world"]), ep.text)) for e, ep in zip(rows, solver)]
        proposer = learner.run_episodes(proposer_envs, rows, "proposer", jax.random.fold_in(rng, 1))
        # at most 10 pairs (parse_questions), each question cut to MAX_QUESTION_CHARS: the Checker's prompt stays bounded
        pairs = [[(q[:MAX_QUESTION_CHARS], a) for q, a in parse_questions(ep.text)] for ep in proposer]
        prompts = [checker_prompt_for(e, [q for q, _ in p], ep.text, self.symmetric)
                   for e, p, ep in zip(rows, pairs, solver)]
        # the M audits of every response in one call of M x N rows (independent samples: rows have their own keys)
        flat = learner.run_episodes([SingleTurn(p) for _ in range(self.samples) for p in prompts],
                                    rows * self.samples, "checker", jax.random.fold_in(rng, 2))
        audits = [flat[m * len(rows):(m + 1) * len(rows)] for m in range(self.samples)]
        parsed = [[parse_audit(audit[i].text) for audit in audits] for i in range(len(rows))]
        solver_m, checker_m = {k: [] for k in ("halluc_rate", "coverage", "numbers", "self_check_reward", "flagged")}, \
            {k: [] for k in ("agreement", "answered")}
        confirm, oracle_confirm, pair_accuracy = [], [], []
        for i, (e, ep) in enumerate(zip(rows, solver)):
            answers = [a for _, a in pairs[i]]
            faults = vote(answers, parsed[i])
            reward = self_check_reward(faults, self.reward if self.reward != "oracle" else "ztr")
            oracle = nf.oracle_check(e["world"], ep.text)
            ep.reward = (-1.0 if oracle["hallucinated"] else 0.0) if self.reward == "oracle" else reward
            audits[-1][i].reward = reward       # the kept audit: the shared reward on its last valid token
            flagged = any(faults)
            solver_m["halluc_rate"].append(oracle["hallucinated"])
            solver_m["coverage"].append(oracle["coverage"])
            solver_m["numbers"].append(oracle["numbers"])
            solver_m["self_check_reward"].append(reward)
            solver_m["flagged"].append(flagged)
            checker_m["agreement"].append(flagged == oracle["hallucinated"])
            checker_m["answered"].append(np.mean([len(a) / max(len(answers), 1) for a in parsed[i]]) if answers else 1.0)
            for (question, a), fault in zip(pairs[i], faults):
                truth = true_value(e["world"], question)
                if truth is None:
                    continue
                ok = numbers_match(a, str(truth))
                confirm.append(not fault)
                oracle_confirm.append(ok)
                pair_accuracy.append((not fault) == ok)
        mean = lambda xs: float(np.mean(xs)) if len(xs) else 0.0   # noqa: E731
        checker_metrics = {k: mean(v) for k, v in checker_m.items()}
        checker_metrics.update(confirm_rate=mean(confirm), oracle_confirm_rate=mean(oracle_confirm),
                               pair_accuracy=mean(pair_accuracy), pairs=float(len(confirm)))
        return [RoleBatch("solver", solver, {k: mean(v) for k, v in solver_m.items()}),
                RoleBatch("proposer", proposer, {"questions": mean([len(p) for p in pairs])}),
                RoleBatch("checker", audits[-1], checker_metrics)]

    def evaluate(self, learner, examples):
        """The Solver on the test split, greedy (eval/halluc_rate, coverage, numbers_per_response) and sampled at the
        policy's temperature (the same names + "_sampled": what the RL steps see, and what the warm start's injected
        errors show up in: a warm start that imitates its traces exactly hallucinates in about error_rate of its
        samples, and in almost none of its greedy answers, which take each value's most likely, the true, one).
        The first march.eval_print examples are printed with their documents (process 0)."""
        envs = [SingleTurn(e["prompt"]) for e in examples]
        out = {}
        for suffix, greedy in (("", True), ("_sampled", False)):
            episodes = learner.run_episodes(envs, examples, "solver", jax.random.key(0), greedy=greedy)
            checks = [nf.oracle_check(e["world"], ep.text) for e, ep in zip(examples, episodes)]
            out.update({"halluc_rate" + suffix: float(np.mean([c["hallucinated"] for c in checks])),
                        "coverage" + suffix: float(np.mean([c["coverage"] for c in checks])),
                        "numbers_per_response" + suffix: float(np.mean([c["numbers"] for c in checks]))})
            if greedy and self.eval_print and jax.process_index() == 0:
                for e, ep in list(zip(examples, episodes))[:self.eval_print]:
                    print(describe_answer(e["world"], ep.text), flush=True)
        return out


@TASKS.register("march/rl")
def march_rl(config, workdir: str) -> dict:
    """SFT warm start on rl/march/traces (config.agent.sft_*), then MARCH's RL loop on rl/march/numfacts."""
    from shared.data.examples import load_task

    rl = config.rl
    options = dict(rl.task_options)
    train = load_task(rl.task, "train", int(rl.n_train), int(config.seed), **options)
    test = load_task(rl.task, "test", int(rl.n_eval), int(config.seed), **options)
    return run_agent_task(config, workdir, MarchGame(config), train, test)
