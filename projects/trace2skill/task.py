"""TASKS "trace2skill/evolution": one evolution seed of the TinySheet table (spec ../shared/papers/trace2skill.md
4.4-4.5), every arm, both seed skills (deepening, creation) and both trajectory sources (agent S, agent L).

Per (mode, source): the source agent runs the evolution split with the seed skill S0; the analysts turn its
trajectories into lessons (agentic and single-call error analysts, the success analyst); each arm builds a skill
from them; every skill is evaluated with both agents on the held-out in-distribution split (cell-writing) and the
OOD split (TableQA), and with the source agent on the evolution split (for select-best-on-train). The evolution
seed drives the trajectories, the analysts and the lesson order; the task splits are the same for every seed, and
every arm is evaluated with the same random stream (common random numbers: arm differences are paired within a
seed, as well as by seed across points).

Summary keys: <mode>/<source>/<arm>/<agent>/<split> success rates (split test | ood | evolve), <mode>/<source>/<arm>/
diag/<name> skill diagnostics (precision, recall, local_share, over_share, contradictions, words), and
<mode>/<source>/lessons/<analyst>/{count,precision} for the analysts.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

import numpy as np

from projects.trace2skill import evolution, rules
from projects.trace2skill.agent import PROFILES, run_agent
from projects.trace2skill.analysts import (agentic_error_analyst, lesson_precision, single_call_error_analyst,
                                           success_analyst)
from projects.trace2skill.tinysheet import QUIRKS, make_tasks, task_text

MODES = ("deepening", "creation")
SOURCES = ("S", "L")
AGENTS = ("S", "L")
ARMS = ("none", "s0", "t2s", "t2s_error", "t2s_success", "t2s_single", "t2s_tau1", "seq_b1", "seq_b4", "bank",
        "oracle")
# oracle: one precise rule for every quirk (rules.full_skill), the best skill this rule library can write: the
# ceiling an evolved skill is measured against (<key>/<arm>/<agent>/<split>/below_oracle = oracle - arm)
SPLIT_SEEDS = {"evolve": 101, "test": 202, "ood": 303}   # fixed task sets: only the evolution seed varies


def diagnostics(skill_text: str, budget: int) -> dict:
    """What an agent reads of a skill, against the true quirk set: a good rule is a precise "use the fix" rule;
    over-general, instance-local and negative rules are not (in TinySheet every quirk's fix is right when its quirk
    is present, and a negative rule forbids it)."""
    seen = rules.read_rules(skill_text, budget)
    entries = [(q, kind) for q, items in seen.items() for kind, _ in items]
    good = [(q, k) for q, k in entries if k == "precise"]
    n = max(len(entries), 1)
    firing = {"precise", "over", "vague"}
    contradictions = sum(1 for q, items in seen.items()
                         if {k for k, _ in items} & firing and any(k == "negative" for k, _ in items))
    return {"precision": len(good) / n if entries else 0.0,
            "recall": len({q for q, _ in good}) / len(QUIRKS),
            "local_share": sum(k == "local" for _, k in entries) / n,
            "over_share": sum(k == "over" for _, k in entries) / n,
            "contradictions": float(contradictions),
            "words": float(rules.count_tokens(skill_text))}


def success_rate(profile, skill, tasks, seed: int) -> float:
    """Mean success of `profile` over `tasks`; skill is a text or a callable task text -> context (the bank)."""
    rng = np.random.default_rng(seed)
    wins = 0
    for t in tasks:
        text = skill(task_text(t)) if callable(skill) else skill
        wins += run_agent(profile, text, t, rng).success
    return wins / len(tasks)


def lessons_of(trajectories, by_id, rng, o) -> dict[str, list]:
    """The analysts over one trajectory pool; each list in its own shuffled order (the evolution seed's)."""
    agentic, single, success, calls = [], [], [], 0
    for traj in trajectories:
        task = by_id[traj.task_id]
        if traj.success:
            success += success_analyst(traj, task, rng, p_local=o.p_local, p_over=o.p_over)
        else:
            found, used = agentic_error_analyst(traj, task, rng, p_local=o.p_local, p_over=o.p_over,
                                                max_calls=o.max_calls)
            agentic += found
            calls += used
            single += single_call_error_analyst(traj, task, rng, p_wrong=o.p_wrong, p_local=o.p_local,
                                                p_over=o.p_over)
    def shuffled(items):
        return [items[i] for i in rng.permutation(len(items))]

    out = {name: shuffled(items) for name, items in (("agentic", agentic), ("single", single), ("success", success))}
    out["combined"] = shuffled(agentic + success)
    out["single_combined"] = shuffled(single + success)
    out["calls"] = calls
    return out


def build_skills(s0: str, lessons: dict, o) -> tuple[dict, dict]:
    """Every arm's skill (the bank: a per-task context) and the evolvers' logs."""
    t2s = dict(tau=int(o.tau), fan_in=int(o.fan_in), max_levels=int(o.max_levels))
    results = {
        "t2s": evolution.evolve_trace2skill(s0, lessons["combined"], **t2s),
        "t2s_error": evolution.evolve_trace2skill(s0, lessons["agentic"], **t2s),
        "t2s_success": evolution.evolve_trace2skill(s0, lessons["success"], **t2s),
        "t2s_single": evolution.evolve_trace2skill(s0, lessons["single_combined"], **t2s),
        "t2s_tau1": evolution.evolve_trace2skill(s0, lessons["combined"], **{**t2s, "tau": 1}, concatenate=True),
        "seq_b1": evolution.evolve_sequential(s0, lessons["combined"], batch_size=1),
        "seq_b4": evolution.evolve_sequential(s0, lessons["combined"], batch_size=4),
    }
    skills = {"none": "", "s0": s0, **{k: r.skill.skill_md() for k, r in results.items()},
              "bank": evolution.BankContext(s0, lessons["combined"], int(o.budget_tokens)),
              "oracle": rules.full_skill(np.random.default_rng(0))}
    return skills, results


def run(config, workdir: str) -> dict:
    from shared.train import write_summary

    o, seed = config.trace2skill, int(config.seed)
    start = time.perf_counter()
    tasks = {"evolve": make_tasks(int(o.n_evolve), "cell", SPLIT_SEEDS["evolve"], "evolve"),
             "test": make_tasks(int(o.n_test), "cell", SPLIT_SEEDS["test"], "test"),
             "ood": make_tasks(int(o.n_ood), "tableqa", SPLIT_SEEDS["ood"], "test")}
    by_id = {t.task_id: t for t in tasks["evolve"]}
    profiles = {name: PROFILES[name] for name in AGENTS}
    profiles = {k: dataclasses.replace(p, budget_tokens=int(o.budget_tokens)) for k, p in profiles.items()}
    summary, skills_out = {}, {}
    for mi, mode in enumerate(MODES):
        s0 = rules.seed_skill(mode, np.random.default_rng(0))   # one S0 per mode for every seed
        for si, source in enumerate(SOURCES):
            key = f"{mode}/{source}"
            rng = np.random.default_rng([seed, mi, si])
            trajectories = [run_agent(profiles[source], s0, t, rng) for t in tasks["evolve"]]
            lessons = lessons_of(trajectories, by_id, rng, o)
            for analyst in ("agentic", "single", "success"):
                summary[f"{key}/lessons/{analyst}/count"] = float(len(lessons[analyst]))
                summary[f"{key}/lessons/{analyst}/precision"] = lesson_precision(lessons[analyst], by_id)
            summary[f"{key}/lessons/agentic/calls"] = float(lessons["calls"])
            skills, results = build_skills(s0, lessons, o)
            for arm in ARMS:
                skill = skills[arm]
                eval_seed = 7_000 + 10 * mi   # the same stream for every arm and seed (common random numbers)
                for agent in AGENTS:
                    for split in ("test", "ood"):
                        summary[f"{key}/{arm}/{agent}/{split}"] = success_rate(profiles[agent], skill, tasks[split],
                                                                              eval_seed + AGENTS.index(agent))
                summary[f"{key}/{arm}/{source}/evolve"] = success_rate(profiles[source], skill, tasks["evolve"],
                                                                       eval_seed + 5)
                if not callable(skill):
                    for name, value in diagnostics(skill, int(o.budget_tokens)).items():
                        summary[f"{key}/{arm}/diag/{name}"] = value
                    skills_out[f"{key}/{arm}"] = skill
            for arm, result in results.items():
                summary[f"{key}/{arm}/merge_levels"] = float(result.levels)
            for arm in ARMS:
                for agent in AGENTS:
                    for split in ("test", "ood"):
                        name = f"{key}/{arm}/{agent}/{split}"
                        summary[f"{name}/below_oracle"] = summary[f"{key}/oracle/{agent}/{split}"] - summary[name]
    # derived columns for the ledger: the transfer claim's excess (spec 4.5 item 3), per mode
    for mode in MODES:
        own = summary[f"{mode}/L/t2s/L/test"] - summary[f"{mode}/L/s0/L/test"]
        moved = summary[f"{mode}/S/t2s/L/test"] - summary[f"{mode}/S/s0/L/test"]
        summary[f"{mode}/transfer_S_to_L/excess"] = moved - 0.5 * own
    summary["wall_time_s"] = time.perf_counter() - start
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "skills.json"), "w") as f:
        json.dump(skills_out, f, indent=1, sort_keys=True)
    write_summary(workdir, summary)
    return summary
