"""Programmatic analysts of the TinySheet reproduction (spec ../shared/papers/trace2skill.md 4.3): they turn
trajectories into lessons, the Failure-Memory / Success-Memory items of the released records, one lesson per
(quirk, flag, polarity) with the cues seen on the task and a rendered rule line.

  agentic_error_analyst      A- agentic: re-runs the failed program with flag flips (singles, then pairs, then
                             triples of evidence flips: our extension) through tinysheet.check, at most max_calls;
                             the first flip set that passes all 3 variants is the proven cause
  single_call_error_analyst  A- single call (ablation): no re-execution; a guess from the log and the sheet that
                             is wrong with p_wrong (spec: ~35%)
  success_analyst            A+: the needed flags a successful run used
Phrasing of every lesson: instance-local with p_local, over-general with p_over, else precise (conditional on the
task's cues of the quirk); a "do not use" lesson is rendered as a negative rule (local when the phrasing is local).
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from projects.trace2skill import rules
from projects.trace2skill import tinysheet as ts
from projects.trace2skill.agent import Trajectory
from projects.trace2skill.tinysheet import CUES, FAMILY_QUIRKS, FLAG, HARMFUL, QUIRK_OF_FLAG


@dataclasses.dataclass(frozen=True)
class Lesson:
    """One lesson: use (polarity +1) or do not use (-1) the quirk's flag; conditions: the task's visible cues of
    the quirk; wording: precise | local | over; source: error | success; sheet_id: the task's id (what a local
    rule names); text: the rule line (rules.rule_line)."""
    trajectory_id: str
    task_id: str
    quirk: str
    flag: str
    polarity: int
    conditions: tuple
    wording: str
    source: str
    sheet_id: str
    text: str


def _wording(rng, p_local: float, p_over: float) -> str:
    u = rng.random()
    return "local" if u < p_local else "over" if u < p_local + p_over else "precise"


def make_lesson(traj: Trajectory, task: ts.Task, quirk: str, polarity: int, source: str, rng, *,
                p_local: float = 0.3, p_over: float = 0.2) -> Lesson:
    """A lesson about `quirk` from this trajectory, its wording drawn and its rule line rendered."""
    conditions = tuple(c for c in CUES[quirk] if task.features.get(c))
    wording = _wording(rng, p_local, p_over)
    variant = int(rng.integers(8))
    if polarity < 0:
        text = rules.rule_line(quirk, "negative", sheet_id=task.task_id if wording == "local" else None)
    elif wording == "local":
        text = rules.rule_line(quirk, "local", sheet_id=task.task_id)
    elif wording == "over":
        text = rules.rule_line(quirk, "over", variant)
    else:
        text = rules.rule_line(quirk, "precise", variant, conditions=conditions)
    return Lesson(traj.trajectory_id, task.task_id, quirk, FLAG[quirk], int(polarity), conditions, wording, source,
                  task.task_id, text)


def true_changes(traj: Trajectory, task: ts.Task) -> list[tuple[str, int]]:
    """The changes that make this run pass (by the task's labels): needed flags it missed (+1) and harmful flags of
    absent quirks it used (-1). Empty for a successful run."""
    gold = ts.gold_flags(task)
    out = [(QUIRK_OF_FLAG[f], 1) for f in ts.FLAGS if f in gold and f not in traj.flags]
    out += [(QUIRK_OF_FLAG[f], -1) for f in ts.FLAGS if f in HARMFUL and f in traj.flags and f not in gold]
    return out


def _flip_order(traj: Trajectory, task: ts.Task) -> tuple[list[str], set[str]]:
    """The flags an analyst may flip, those with evidence first: an unused flag whose quirk shows a cue, and every
    used flag (it may be the harm); then the unused flags without a cue."""
    flags = [FLAG[q] for q in FAMILY_QUIRKS[task.family]]
    present = {f for f, on in task.features.items() if on}
    evidence = {f for f in flags if f in traj.flags or set(CUES[QUIRK_OF_FLAG[f]]) & present}
    return [f for f in flags if f in evidence] + [f for f in flags if f not in evidence], evidence


def flip_sets(traj: Trajectory, task: ts.Task):
    """Flip sets in the order the agentic analyst tries them: singles, then pairs (fewest evidence-less flips
    first), then triples of evidence flips."""
    order, evidence = _flip_order(traj, task)
    yield from ((f,) for f in order)
    pairs = list(itertools.combinations(order, 2))
    yield from sorted(pairs, key=lambda p: sum(f not in evidence for f in p))   # stable: order kept within ties
    yield from itertools.combinations([f for f in order if f in evidence], 3)


def agentic_error_analyst(traj: Trajectory, task: ts.Task, rng: np.random.Generator, *, p_local: float = 0.3,
                          p_over: float = 0.2, max_calls: int = 20) -> tuple[list[Lesson], int]:
    """A- agentic: flips flags of the failed run (each try = one tinysheet.check call, at most max_calls) until a
    flip set passes all variants; one lesson per flipped flag (+1 added, -1 removed). Returns (lessons, calls);
    no lesson for a successful run or when nothing passes within the budget."""
    if traj.success:
        return [], 0
    calls = 0
    for flips in flip_sets(traj, task):
        if calls >= max_calls:
            break
        calls += 1
        if ts.check(task, set(traj.flags) ^ set(flips)):
            lessons = [make_lesson(traj, task, QUIRK_OF_FLAG[f], -1 if f in traj.flags else 1, "error", rng,
                                   p_local=p_local, p_over=p_over) for f in flips]
            return lessons, calls
    return [], calls


def single_call_error_analyst(traj: Trajectory, task: ts.Task, rng: np.random.Generator, *, p_wrong: float = 0.35,
                              p_local: float = 0.3, p_over: float = 0.2) -> list[Lesson]:
    """A- single call: one lesson guessed without re-execution. With 1 - p_wrong the guess is one of the true
    causes (a stand-in for an LLM reading the log right: it is drawn from the task's labels); with p_wrong it is a
    plausible wrong quirk (its cue shows or its flag was used, but it is no cause), else any other quirk of the
    family. Polarity: -1 when the guessed flag was used (blamed), else +1."""
    if traj.success:
        return []
    causes = true_changes(traj, task)
    if causes and rng.random() >= p_wrong:
        quirk, polarity = causes[int(rng.integers(len(causes)))]
    else:
        cause_quirks = {q for q, _ in causes}
        present = {f for f, on in task.features.items() if on}
        others = [q for q in FAMILY_QUIRKS[task.family] if q not in cause_quirks]
        plausible = [q for q in others if FLAG[q] in traj.flags or set(CUES[q]) & present]
        pool = plausible or others
        quirk = pool[int(rng.integers(len(pool)))]
        polarity = -1 if FLAG[quirk] in traj.flags else 1
    return [make_lesson(traj, task, quirk, polarity, "error", rng, p_local=p_local, p_over=p_over)]


def success_analyst(traj: Trajectory, task: ts.Task, rng: np.random.Generator, *, p_local: float = 0.3,
                    p_over: float = 0.2) -> list[Lesson]:
    """A+: one success lesson (+1) per flag the successful run used that its task needs (at most 3)."""
    if not traj.success:
        return []
    return [make_lesson(traj, task, q, 1, "success", rng, p_local=p_local, p_over=p_over)
            for q in ts.QUIRKS if q in task.quirks and FLAG[q] in traj.flags]


def lesson_is_right(lesson: Lesson, task: ts.Task) -> bool:
    """A "use" lesson is right when its quirk is in the task; a "do not use" lesson when its quirk is absent and
    its flag is harmful (forbidding a no-op flag teaches nothing: counted wrong)."""
    if lesson.polarity > 0:
        return lesson.quirk in task.quirks
    return lesson.quirk not in task.quirks and lesson.flag in HARMFUL


def lesson_precision(lessons, tasks_by_id: dict) -> float:
    """Share of lessons that are right about their own task (lesson_is_right); 0.0 for no lessons."""
    if not lessons:
        return 0.0
    return float(np.mean([lesson_is_right(x, tasks_by_id[x.task_id]) for x in lessons]))
