"""The task skill_rm/heterojudge: one seed of the HeteroJudge comparison (data, the two tiny RMs, the evidence
table, every judge), all on CPU. Writes summary.json with, per judge J: J/accuracy, J/<family>/accuracy, J/cost;
best_single/accuracy and best_single/<family>/accuracy (the best single-evidence judge on the eval split), the
skill controller's action rates, and the RMs' held-out pair accuracy."""
from __future__ import annotations

import os
import time

import numpy as np

from projects.skill_rm.controller import Controller, case_features, fit_flat, flat_inputs, oracle
from projects.skill_rm.data import FAMILIES, build_mixture
from projects.skill_rm.evidence import ACTIONS, credit, readout, sandbox_evidence
from projects.skill_rm.rm import BTRewardModel
from shared.judges.skills import ResourceRouter, load_skill

SKILL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "skill")
TOOL_ONLY = ("direct", "python_check")
JUDGES = ("baseline", "tool_only", "call_all", "flat", "skill", "oracle") + tuple(f"single_{a}" for a in ACTIONS)


def settings(skill) -> tuple[np.ndarray, np.ndarray]:
    """(actions the operational setting may use, actions the fair setting may use), bool [A], from the router."""
    masks = []
    for setting in ("operational", "fair"):
        ids = {r.id for r in ResourceRouter(skill, setting).available()}
        unknown = ids - set(ACTIONS)
        if unknown:
            raise ValueError(f"{skill.folder}/resources.json: resources {sorted(unknown)} are no HeteroJudge action")
        masks.append(np.array([a in ids for a in ACTIONS]))
    return masks[0], masks[1]


def pairs(cases):
    chosen = [c["a"] if c["gold"] > 0 else c["b"] for c in cases]
    rejected = [c["b"] if c["gold"] > 0 else c["a"] for c in cases]
    return chosen, rejected


def evidence_table(cases, generic: BTRewardModel, rubric: BTRewardModel, backend):
    """(evidence int8 [N, A], RM margins float [N, 2]) of every action on every case."""
    a, b = [c["a"] for c in cases], [c["b"] for c in cases]
    is_hh = np.array([c["family"] == "hh" for c in cases])
    found = sandbox_evidence(cases, backend)
    margins = np.stack([generic.score(a) - generic.score(b), rubric.score(a) - rubric.score(b)], 1)
    found["direct"] = np.sign(margins[:, 0]).astype(np.int8)
    found["view_rubric"] = np.where(is_hh, np.sign(margins[:, 1]), 0).astype(np.int8)
    return np.stack([found[x] for x in ACTIONS], 1), margins


def run(config, workdir: str) -> dict:
    from shared.train import write_summary

    o, seed = config.skill_rm, int(config.seed)
    start = time.perf_counter()
    skill = load_skill(o.skill_dir or SKILL_DIR)
    costs = np.array([skill.resources[a].cost for a in ACTIONS])
    operational, fair = settings(skill)
    if not all(fair[ACTIONS.index(a)] for a in TOOL_ONLY):
        raise ValueError(f"{skill.folder}: tool_only needs {TOOL_ONLY} open in the fair setting")
    sizes = {"rm": int(o.n_rm), "controller": int(o.n_controller), "eval": int(o.n_eval)}
    splits = build_mixture(seed, sizes, source=o.source, p_strip=float(o.p_strip),
                           p_propagated=float(o.p_propagated), gsm8k_path=o.gsm8k_path, hh_path=o.hh_path)
    backend = o.sandbox_backend or None
    generic, rubric = BTRewardModel(int(o.rm_dim)), BTRewardModel(int(o.rm_dim))
    generic.fit(*pairs(splits["rm"]), steps=int(o.rm_steps))
    rubric.fit(*pairs([c for c in splits["rm"] if c["family"] == "hh"]), steps=int(o.rm_steps))

    train, test = splits["controller"], splits["eval"]
    e_train, m_train = evidence_table(train, generic, rubric, backend)
    e_test, m_test = evidence_table(test, generic, rubric, backend)
    g_train, g_test = np.array([c["gold"] for c in train]), np.array([c["gold"] for c in test])
    family = np.array([c["family"] for c in test])

    controller = Controller(6, costs, operational, max_actions=int(o.max_actions), seed=seed)
    rewards = controller.train(case_features(train), e_train, g_train, lam=float(o.cost_lambda),
                               steps=int(o.controller_steps), lr=float(o.controller_lr), seed=seed,
                               entropy=float(o.controller_entropy))
    taken_skill, _ = controller.rollout(case_features(test), e_test)
    w_flat = fit_flat(flat_inputs(e_train, m_train), g_train)
    p_flat = np.sign(flat_inputs(e_test, m_test) @ w_flat).astype(np.int8)

    n = len(test)
    everything = np.tile(operational, (n, 1))
    judged = {}   # judge -> (credit [N], cost [N])
    for j, action in enumerate(ACTIONS):
        judged[f"single_{action}"] = (credit(e_test[:, j], g_test), np.full(n, costs[j]))
    judged["baseline"] = judged["single_direct"]
    tool = np.tile(np.array([a in TOOL_ONLY for a in ACTIONS]), (n, 1))
    judged["tool_only"] = (credit(readout(e_test, tool), g_test), (tool * costs).sum(1))
    judged["call_all"] = (credit(readout(e_test, everything), g_test), (everything * costs).sum(1))
    judged["flat"] = (credit(p_flat, g_test), (everything * costs).sum(1))
    judged["skill"] = (credit(readout(e_test, taken_skill), g_test), (taken_skill * costs).sum(1))
    judged["oracle"] = oracle(e_test, g_test, costs, operational)

    summary = {"seed": seed}
    for name, (got, cost) in judged.items():
        summary[f"{name}/accuracy"] = float(got.mean())
        summary[f"{name}/cost"] = float(cost.mean())
        for f in FAMILIES:
            summary[f"{name}/{f}/accuracy"] = float(got[family == f].mean())
    singles = [f"single_{a}" for a in ACTIONS]
    summary["best_single/accuracy"] = max(summary[f"{s}/accuracy"] for s in singles)
    for f in FAMILIES:
        summary[f"best_single/{f}/accuracy"] = max(summary[f"{s}/{f}/accuracy"] for s in singles)
        for j, action in enumerate(ACTIONS):
            summary[f"skill/{f}/rate_{action}"] = float(taken_skill[family == f, j].mean())
    summary["skill/train_reward_first"], summary["skill/train_reward_last"] = rewards[0], rewards[-1]
    hh_test = [c for c in test if c["family"] == "hh"]
    for name, model, cases in (("rm_generic", generic, test), ("rm_hh", rubric, hh_test)):
        chosen, rejected = pairs(cases)
        summary[f"{name}/pair_accuracy"] = float(np.mean(model.score(chosen) > model.score(rejected)))
    summary["wall_time_s"] = time.perf_counter() - start
    write_summary(workdir, summary)
    print("[skill_rm] " + " | ".join(f"{j} {summary[f'{j}/accuracy']:.3f} (cost {summary[f'{j}/cost']:.2f})"
                                     for j in ("baseline", "tool_only", "flat", "call_all", "skill", "oracle")),
          flush=True)
    return summary
