"""The programmatic teacher agent of the TinySheet reproduction: the demonstration policy of spec
../shared/papers/trace2skill.md 4.2, which the SFT traces of the tiny LMs will later be generated from.

The agent reads the skill (rules.read_rules within its budget), VIEWs the sheet, decides per quirk whether to use
its fix flag, RUNs the op of the task with those flags and SUBMITs. Per quirk, in this order:
  1. firing rules: a precise rule fires when one of its conditions' cues is in the task's features (an
     unconditional precise rule: one of the quirk's own cues); an over-general rule always fires (also on sheets
     without the quirk: that is the harm); a local rule fires only on the sheet it names (another sheet's local
     rule is no rule); a vague rule fires with p_vague when a cue of the quirk is present;
  2. a negative rule that applies (general, or local to this sheet) against a firing rule: a contradiction, one
     of the two is followed at random (p = 0.5); a negative rule alone: the flag is not used;
  3. nothing fired and no negative rule: the agent's own prior, the flag with base_rate[quirk] when a cue of the
     quirk is present (never without a cue). A vague rule that did not fire falls back to this prior too (our
     choice: a hint never makes the agent worse than no hint).
Random numbers: each task draws a fixed block (3 uniforms per quirk) whatever the skill says, so two skills
evaluated with the same seed see the same draws (common random numbers: arm differences are paired).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from projects.trace2skill import tinysheet as ts
from projects.trace2skill.rules import read_rules_cached
from projects.trace2skill.tinysheet import CUES, FLAG, QUIRKS

N_DRAWS = 3 * len(QUIRKS)        # per quirk: vague rule, contradiction, base rate


@dataclasses.dataclass(frozen=True)
class AgentProfile:
    """A teacher-agent profile. base_rate: P(fix used | a cue of the quirk is visible, no rule), per quirk;
    p_vague: P(fix used | vague rule, cue visible) before the prior; budget_tokens: the skill slot (words)."""
    name: str
    base_rate: dict
    p_vague: float = 0.5
    budget_tokens: int = 512


# Our choice of profiles (spec 4.2: visible quirks ~0.5, hidden ones ~0.1; S and L fail on different quirks):
#   S (small) spots number formats (thousands, percent) and messy keys more often than L;
#   L (large) handles structure (sections, answer positions, dates, and hidden title/totals rows a bit) more often,
#   and follows vague hints more reliably (0.7 vs 0.4).
PROFILES = {
    "S": AgentProfile("S", {"thousands": 0.6, "title_row": 0.1, "totals_row": 0.05, "sections": 0.3,
                            "date_dmy": 0.2, "range_write": 0.3, "norm_key": 0.5, "percent": 0.6}, p_vague=0.4),
    "L": AgentProfile("L", {"thousands": 0.35, "title_row": 0.15, "totals_row": 0.15, "sections": 0.6,
                            "date_dmy": 0.45, "range_write": 0.6, "norm_key": 0.25, "percent": 0.35}, p_vague=0.7),
}


@dataclasses.dataclass
class Trajectory:
    """One episode: the flags the agent ran with, whether the program passed all 3 variants, and the text log
    (VIEW, RUN <program>, SUBMIT with their observations; what the single-call analyst reads)."""
    trajectory_id: str
    task_id: str
    family: str
    flags: frozenset
    success: bool
    log: str
    profile: str


def decide_flags(profile: AgentProfile, skill_text: str, task: ts.Task, draws) -> frozenset:
    """The flags the policy uses on this task (module docstring), given N_DRAWS uniforms in [0, 1)."""
    seen = dict(read_rules_cached(skill_text, int(profile.budget_tokens)))
    present = {f for f, on in task.features.items() if on}
    flags = set()
    for i, q in enumerate(QUIRKS):
        u_vague, u_conflict, u_base = draws[3 * i:3 * i + 3]
        cue = any(c in present for c in CUES[q])
        fired = negative = vague = False
        for kind, args in seen.get(q, ()):
            if kind == "precise":
                fired |= bool(set(args or CUES[q]) & present)
            elif kind == "over":
                fired = True
            elif kind == "local":
                fired |= task.task_id in args
            elif kind == "vague":
                vague = True
            elif kind == "negative":
                negative |= not args or task.task_id in args
        if not fired and vague and cue and u_vague < profile.p_vague:
            fired = True
        if fired and negative:
            use = u_conflict < 0.5
        elif fired or negative:
            use = fired
        else:
            use = cue and u_base < profile.base_rate.get(q, 0.0)
        if use:
            flags.add(FLAG[q])
    return frozenset(flags)


def _observation(task: ts.Task, program: ts.Program, output) -> str:
    """What RUN prints on the first variant: the value, or an error, plus how many rows were read and how many
    cells of the program's columns did not parse (the tool's warnings)."""
    sheet = task.variants[0]
    header, data = ts.read_table(sheet, program.flags)
    names = [n for n in (program.column, program.column2) if n] + [c for c, _, _ in program.where]
    missing = [n for n in names if n not in header]
    if missing:
        return f"error: column {missing[0]!r} not found (header row: {' | '.join(h for h in header if h)})"
    key_columns = {c for c, cmp, _ in program.where if cmp == "="}
    unparsed = 0
    for name in dict.fromkeys(n for n in names if n not in key_columns):
        j, parse = header.index(name), ts.parse_date if ts.column_kind(name) == "date" else ts.parse_number
        unparsed += sum(1 for row in data if row[j].strip() and parse(row[j], program.flags) is None)
    value = output[1] if program.answer_position else output
    return f"{value} (rows read: {len(data)}; unparsed cells: {unparsed})"


def program_text(program: ts.Program) -> str:
    """The DSL text of a program, e.g. SUM(Units) WHERE Region = north [parse=num, sections]."""
    args = ", ".join(x for x in (program.column, program.column2, program.key and repr(program.key)) if x)
    conds = []
    for name, cmp, target in program.where:
        conds.append(f"month({name}) = {target}" if cmp == "month" else f"{name} {cmp} {target}")
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    flags = ", ".join(f for f in ts.FLAGS if f in program.flags)
    return f"{program.op}({args}){where} [{flags}]"


def run_agent(profile: AgentProfile, skill_text: str, task: ts.Task, rng: np.random.Generator) -> Trajectory:
    """One teacher episode on a task with the skill in context; success = tinysheet.check(task, flags)."""
    flags = decide_flags(profile, skill_text, task, rng.random(N_DRAWS))
    program = task.program.with_flags(flags)
    outputs = [ts.execute(s, program) for s in task.variants]
    success = all(o == a for o, a in zip(outputs, task.answers))
    n_rows = len(task.variants[0].rows)
    first = ts.view_text(task.variants[0], 1, 1)
    log = [f"VIEW 1..{n_rows}", f"> {n_rows} rows; {first}", f"RUN {program_text(program)}",
           f"> {_observation(task, program, outputs[0])}", "SUBMIT"]
    if program.answer_position:
        log.append(f"> written at {outputs[0][0]}")
    else:
        log.append("> answer returned")
    return Trajectory(f"{profile.name}/{task.task_id}", task.task_id, task.family, flags, success, "\n".join(log),
                      profile.name)


def evaluate(profile: AgentProfile, skill_text: str, tasks, rng: np.random.Generator) -> float:
    """Success rate of the profile with this skill over the tasks (one episode each)."""
    return float(np.mean([run_agent(profile, skill_text, t, rng).success for t in tasks])) if tasks else 0.0


def success_by_quirk(trajectories, tasks) -> dict[str, float]:
    """Success rate over the tasks holding each quirk ('none': tasks without quirks; 'all': every task); a quirk
    without tasks is left out."""
    by_id = {t.task_id: t for t in tasks}
    groups: dict[str, list[bool]] = {"all": []}
    for traj in trajectories:
        quirks = by_id[traj.task_id].quirks
        groups["all"].append(traj.success)
        for key in (quirks or ("none",)):
            groups.setdefault(key, []).append(traj.success)
    order = ("all", "none") + QUIRKS
    return {k: float(np.mean(groups[k])) for k in order if groups.get(k)}


def evaluate_by_quirk(profile: AgentProfile, skill_text: str, tasks, rng: np.random.Generator) -> dict[str, float]:
    """evaluate, broken down by quirk (success_by_quirk of one episode per task)."""
    return success_by_quirk([run_agent(profile, skill_text, t, rng) for t in tasks], tasks)
