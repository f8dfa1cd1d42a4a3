"""Registrations of the project's data: the word tokenizer (TOKENIZERS "ssp/words") and two example sets:

    rl/ssp_traces   the SFT warm start's programmatic traces of both roles (traces.py); train / test splits
    rl/ssp_qa       labelled QA: train = questions over the answer pool D (the supervised-RLVR arm's data),
                    test = the held-out evaluation QA (answers outside D); options hops (list)

Both read the KB options kb_seed, kb_sizes ({type: count}; {} = the spec's 3,000 entities), pool_size; the
tokenizer reads them from data.task_options, so every config that names "ssp/words" sets them there.
projects/ssp/__init__.py registers these by name with factories that import this module on first use (the sweep
process imports experiment files and must not import jax); a set's checker joins TASK_CHECKERS when it loads.
"""
from __future__ import annotations

from projects.ssp import kb as kb_lib
from projects.ssp.game import OracleReader, rule_check, solver_reward
from projects.ssp.prompts import WordTokenizer, solver_prompt
from shared.data.examples import TASK_CHECKERS, check_split

KB_KEYS = ("kb_seed", "kb_sizes", "pool_size")


def kb_options(options) -> dict:
    options = options.to_dict() if hasattr(options, "to_dict") else dict(options or {})
    return {"kb_seed": int(options.get("kb_seed", 0)),
            "sizes": tuple(sorted(dict(options.get("kb_sizes", {}) or {}).items())),
            "pool_size": int(options.get("pool_size", 2000))}


def env_of(options):
    from projects.ssp.traces import environment

    return environment(**kb_options(options))


def word_tokenizer(data_cfg) -> WordTokenizer:
    return WordTokenizer(env_of(data_cfg.get("task_options", {})).kb)


def _trace_checker(example: dict, completion: str) -> bool:
    """A trace is right if it ends as the role should: the solver's (and reader's) answer is a*, the proposer's
    question passes the rule filters and its own evidence leads the oracle reader to a*."""
    if example.get("role") == "proposer":
        from projects.ssp.prompts import documents

        q, reason = rule_check(completion, example["answer"])
        return reason == "ok" and OracleReader.read(q, documents(completion)) == example["answer"]
    return solver_reward(completion, example["answer"]) == 1.0


def ssp_traces(split: str, n: int, seed: int = 0, noise: float = 0.1, hops=(1, 2, 3), **options) -> list[dict]:
    from projects.ssp.traces import sft_examples

    TASK_CHECKERS.setdefault("ssp_traces", _trace_checker)
    check_split("ssp_traces", split, ("train", "test"))
    env = env_of(options)
    return sft_examples(env, n, seed if split == "train" else seed + 7919, noise=noise, hops=tuple(hops))


def _qa_checker(example: dict, completion: str) -> bool:
    return solver_reward(completion, example["answer"]) == 1.0


def ssp_qa(split: str, n: int, seed: int = 0, hops=(1, 2, 3), **options) -> list[dict]:
    """n QA pairs split evenly over `hops` (labels: the supervised arm's reward and the evaluation only)."""
    TASK_CHECKERS.setdefault("ssp_qa", _qa_checker)
    check_split("ssp_qa", split, ("train", "test"))
    env = env_of(options)
    answers = env.pool if split == "train" else env.held_out
    hops = list(hops)
    out = []
    for i, h in enumerate(hops):
        count = n // len(hops) + (i < n % len(hops))
        # the test split's questions do not depend on the run's seed: every arm and seed is scored on the same set
        qs = kb_lib.eval_questions(env.kb, answers, h, count, seed=seed if split == "train" else 12345)
        out += [{"prompt": solver_prompt(q["question"]), "completion": "", "answer": q["answer"],
                 "question": q["question"], "hops": h, "task": "ssp_qa"} for q in qs]
    return out

