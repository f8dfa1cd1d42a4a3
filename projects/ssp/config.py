"""config.ssp: the self-play game's keys (ssp.md D.3 defaults), the arms of D.3 as switches, and their check.

    c.ssp = ssp_config()            # then e.g. --config.ssp.rag=none, --config.ssp.n_distractors=8

Arms (ARMS, the overrides each sets on top of the SSP default):
    ssp               proposer REINFORCE (A = R) + solver GRPO, RAG check by the policy reader, 4 distractors
    solver_only       proposer frozen at its warm start (agent.roles.proposer.train False: its episodes come from
                      the SFT weights and are not trained)
    proposer_only     solver frozen at its warm start (agent.roles.solver.train False: solver episodes and the RAG
                      reader use the SFT weights)
    no_rag            rule filters only
    distractors_0/8   the RAG check with 0 / 8 distractor documents
    oracle_reader     the RAG check by a perfect reader of the materials (an upper bound of the filter)
    penalty           invalid questions get -0.1 instead of 0 (the collapse ablation)
    supervised        GRPO on labelled QA of the same distribution (rl/ssp_qa train), no proposer: an upper bound
This module imports no jax (experiment files import it in the sweep process).
"""
from __future__ import annotations

import ml_collections

from shared.config import register_validator

RAG = ("policy", "oracle", "none")
QUESTIONS = ("selfplay", "supervised")
PROPOSER_REWARDS = ("one_minus", "intermediate")

ARMS = {
    "ssp": {},
    "solver_only": {"agent.roles.proposer.train": False},
    "proposer_only": {"agent.roles.solver.train": False},
    "no_rag": {"ssp.rag": "none"},
    "distractors_0": {"ssp.n_distractors": 0},
    "distractors_8": {"ssp.n_distractors": 8},
    "oracle_reader": {"ssp.rag": "oracle"},
    "penalty": {"ssp.invalid_reward": -0.1},
    "supervised": {"ssp.questions": "supervised"},
}


def ssp_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # the environment (ssp.md D.1); kb_sizes {} = 1,200 people, 700 companies, 700 towns, 200 rivers, 200 regions
    c.kb_seed = 0
    c.kb_sizes = ml_collections.ConfigDict()
    c.pool_size = 2000              # the answer pool D; evaluation answers are the other entities
    c.top_k = 3                     # documents per search
    c.hops = [1, 2, 3]              # hop counts asked of the proposer (uniform), and of the evaluation
    # the game (A.2-A.4)
    c.questions = "selfplay"        # selfplay | supervised (labelled QA, no proposer)
    c.rag = "policy"                # policy (the policy in solver mode, no tool) | oracle | none
    c.n_distractors = 4
    c.reader_rows = 0               # policy-reader episodes per sampler call (0: all of a step's in one call)
    c.invalid_reward = 0.0          # the paper's main setting; -0.1 is the collapse ablation
    c.proposer_reward = "one_minus"  # 1 - s | intermediate: 4 s (1 - s)
    c.replay_reset_every = 10       # 0: never cleared (full reuse)
    c.replay_max_success = 1.0      # questions kept in the buffer at most this solved (1.0: any)
    c.max_answer_tags = 10          # more <answer> or </answer> tags than this: solver reward / 4
    c.min_chars, c.max_chars, c.min_words, c.min_searches = 10, 1000, 7, 2
    # evaluation: greedy solver episodes on held-out QA (rl/ssp_qa test), per hop count
    c.eval_per_hop = 1000
    c.eval_rows = 512               # episodes per sampler call (the KV cache of 3,000 at once would not fit)
    # the SFT warm start's stop (task "ssp/warmstart"; D.2: under-train, solver ~30-40% on 2-hop): every
    # warm_check_every steps, greedy solver accuracy (with the tool, config.agent's turns) on warm_val_questions
    # labelled questions of warm_target_hops hops over the answer pool D (never the evaluation answers); the stage
    # stops at the first check >= warm_target (0: no check, it runs train.steps like the plain sft task)
    c.warm_target = 0.0
    c.warm_target_hops = 2
    c.warm_check_every = 50
    c.warm_val_questions = 300
    return c


def agent_group(max_turns: int = 6, max_turn_tokens: int = 40, context_slots: int = 1024) -> ml_collections.ConfigDict:
    """config.agent of shared/agent (its agent_config(), whose module imports jax, rebuilt here; a test checks
    the keys match) with the three roles of the game: proposer REINFORCE with n = 1 (A = R: GRPO's estimator on
    groups of one would centre every reward to 0), solver GRPO, the RAG reader (sampled greedily, never trained)."""
    c = ml_collections.ConfigDict()
    c.max_turns = max_turns
    c.max_turn_tokens = max_turn_tokens
    c.context_slots = context_slots
    c.stop_strings = ["</search>"]
    c.reuse_cache = True
    c.chunk_buckets = [32, 64, 128, 256, 512, 1024, 2048]
    c.roles = ml_collections.ConfigDict({
        "proposer": {"advantage": "ssp/reinforce", "group_size": 1, "train": True},
        "solver": {"advantage": "grpo", "group_size": 5, "train": True},
        "reader": {"advantage": "grpo", "group_size": 1, "train": False, "max_turns": 1},
    })
    c.sft_task = "rl/ssp_traces"
    c.sft_options = ml_collections.ConfigDict()
    c.sft_n_train = 0
    return c


@register_validator
def check_ssp(config, *_):
    if "ssp" not in config:
        return
    s = config.ssp
    for key, allowed in (("rag", RAG), ("questions", QUESTIONS), ("proposer_reward", PROPOSER_REWARDS)):
        if s[key] not in allowed:
            raise ValueError(f"config.ssp.{key}={s[key]!r}: expected one of {', '.join(allowed)}")
    if s.n_distractors < 0 or s.top_k < 1 or s.pool_size < 1 or not s.hops or min(s.hops) < 1:
        raise ValueError(f"config.ssp: n_distractors={s.n_distractors} must be >= 0, top_k={s.top_k} and "
                         f"pool_size={s.pool_size} >= 1, hops={list(s.hops)} non-empty and >= 1")
    if config.task == "ssp/selfplay":
        _check_roles(config)
    if config.task == "ssp/warmstart" and s.warm_target > 0:
        _check_warm_stop(config)
    if config.data.get("tokenizer") == "ssp/words":
        opts = config.data.get("task_options", {})
        mine = {"kb_seed": s.kb_seed, "kb_sizes": dict(s.kb_sizes), "pool_size": s.pool_size}
        theirs = {k: (dict(opts[k]) if k == "kb_sizes" else opts[k]) for k in mine if k in opts}
        if theirs != mine:
            raise ValueError(f"config.data.task_options {theirs} must repeat config.ssp's KB {mine}: the word "
                             "tokenizer and the SFT traces read the KB from there")


def _check_roles(config):
    roles = config.agent.roles if "agent" in config else {}
    missing = [r for r in ("proposer", "solver", "reader") if r not in roles]
    if missing:
        raise ValueError(f"config.agent.roles lacks {missing}: the ssp game plays proposer, solver and reader "
                         "(projects/ssp/config.py agent_group)")
    train = {r: bool(roles[r].get("train", True)) for r in ("proposer", "solver")}
    if not any(train.values()):
        raise ValueError("config.agent.roles.proposer.train and .solver.train are both False: nothing is trained")
    if config.ssp.questions == "supervised" and not train["solver"]:
        raise ValueError("config.ssp.questions='supervised' trains the solver: config.agent.roles.solver.train "
                         "must be True")


def _check_warm_stop(config):
    s, log_every = config.ssp, int(config.train.log_every)
    if not 0 < s.warm_target <= 1 or s.warm_val_questions < 1 or s.warm_target_hops < 1:
        raise ValueError(f"config.ssp.warm_target={s.warm_target} must be in (0, 1], warm_val_questions="
                         f"{s.warm_val_questions} and warm_target_hops={s.warm_target_hops} >= 1")
    if s.warm_check_every < 1 or s.warm_check_every % log_every:
        raise ValueError(f"config.ssp.warm_check_every={s.warm_check_every} must be a positive multiple of "
                         f"train.log_every={log_every} (the trainer's hooks run on logged steps)")
    if "agent" not in config:
        raise ValueError("config.ssp.warm_target > 0 plays solver episodes with config.agent's turn limits: add "
                         "config.agent (projects/ssp/config.py agent_group)")
