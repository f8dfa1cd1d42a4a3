"""The evolution arms of the TinySheet reproduction (spec ../shared/papers/trace2skill.md 4.4) on the library's
map / reduce and sequential evolvers (shared/skills/evolve.py), with symbolic MAP, MERGE and sequential proposers in
place of the paper's LLM calls (shared/skills/llm.py has those, for when an endpoint exists).

A lesson (analysts.Lesson) becomes one patch against the frozen seed skill S0 (MAP): its rule line appended to the
quirk's section, or a new section. MERGE clusters edits by (quirk, polarity); a cluster's support is the set of
distinct trajectories behind it, carried up the levels in the edit's meta so that the prevalence filter runs once,
on the final merge (filtering at every level would drop a lesson seen once in each of several groups):
- support < tau: dropped (tau = 2 by default; tau = 1 with `concatenate` keeps every lesson line as it came);
- both polarities of a quirk: the one with more support wins (a tie keeps "use the flag": our choice);
- the conditions of a cluster's lessons merge into one conditional rule (the "induction");
- wording: the most specific general wording in the cluster (precise over over-general); an instance-local
  rule becomes precise once two trajectories support it, and stays local (naming its sheet) on one.
The sequential baseline (Seq-B) proposes from each batch alone against the current skill: within-batch
dedupe, no support count, no stripping; the skill budget bites at reading time (rules past 512 words are unseen).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from projects.trace2skill import rules
from projects.trace2skill.analysts import Lesson
from shared.skills.bank import ExperienceBank
from shared.skills.evolve import EvolveResult, map_reduce_evolve, sequential_evolve
from shared.skills.folder import SkillFolder, sections
from shared.skills.patch import Edit, Patch

WORDING_ORDER = ("precise", "local", "over")   # most specific general wording first


def lesson_meta(lesson: Lesson) -> dict:
    return {"quirk": lesson.quirk, "flag": lesson.flag, "polarity": lesson.polarity,
            "conditions": sorted(lesson.conditions), "wordings": [lesson.wording],
            "support": [lesson.trajectory_id], "sheet_id": lesson.sheet_id, "sources": [lesson.source]}


def section_titles(folder: SkillFolder) -> set[str]:
    return {s.title for s in sections(folder.body)}


def section_edit(folder: SkillFolder, quirk: str, lines: Sequence[str], meta: dict) -> Edit:
    """Lines into the quirk's section of the seed skill: appended when the section exists, else a new section."""
    title = rules.QUIRK_TITLE[quirk]
    content = "\n".join(lines)
    if title in section_titles(folder):
        return Edit(op="append_to_section", target_section=title, content=content, meta=meta)
    return Edit(op="add_section", content=f"## {title}\n{content}", meta=meta)


def symbolic_map(s0: SkillFolder, lesson: Lesson) -> Patch:
    """MAP: one patch per lesson against the frozen seed skill."""
    return Patch([section_edit(s0, lesson.quirk, [lesson.text], lesson_meta(lesson))],
                 changelog=[f"{lesson.source}: {lesson.quirk} {lesson.flag} ({lesson.wording})"])


def merged_wording(meta: dict) -> str:
    wordings = set(meta["wordings"])
    if "precise" in wordings or ("local" in wordings and len(meta["support"]) >= 2):
        return "precise"
    return "local" if "local" in wordings else "over"


def render(meta: dict) -> str:
    wording = merged_wording(meta)
    if meta["polarity"] < 0:
        return rules.rule_line(meta["quirk"], "negative")
    if wording == "precise":
        return rules.rule_line(meta["quirk"], "precise", conditions=tuple(meta["conditions"]))
    if wording == "local":
        return rules.rule_line(meta["quirk"], "local", sheet_id=meta["sheet_id"])
    return rules.rule_line(meta["quirk"], "over")


def cluster(edits: Sequence[Edit]) -> dict[tuple[str, int], dict]:
    """Edits grouped by (quirk, polarity): trajectories, conditions and wordings pooled."""
    out: dict[tuple[str, int], dict] = {}
    for e in edits:
        m = e.meta
        key = (m["quirk"], m["polarity"])
        if key not in out:
            out[key] = {**m, "support": set(), "conditions": set(), "wordings": set(), "sources": set()}
        c = out[key]
        c["support"].update(m["support"])
        c["conditions"].update(m["conditions"])
        c["wordings"].update(m["wordings"])
        c["sources"].update(m["sources"])
        c["sheet_id"] = c.get("sheet_id") or m["sheet_id"]
    return {k: {**c, "support": sorted(c["support"]), "conditions": sorted(c["conditions"]),
                "wordings": sorted(c["wordings"]), "sources": sorted(c["sources"])} for k, c in out.items()}


@dataclasses.dataclass(frozen=True)
class SymbolicMerge:
    """MERGE (the library's merge_fn): tau, and `concatenate` for the tau = 1 ablation (no clustering at all)."""
    tau: int = 2
    concatenate: bool = False

    def __call__(self, s0: SkillFolder, patches: Sequence[Patch], *, final: bool = False) -> Patch:
        edits = [e for p in patches for e in p.edits]
        if self.concatenate:
            return Patch(edits) if not final else self.by_section(s0, [(e.meta, e.content.splitlines()[-1])
                                                                       for e in edits])
        clusters = cluster(edits)
        if not final:
            return Patch([section_edit(s0, q, [render(m)], m) for (q, _), m in sorted(clusters.items())])
        kept = {k: m for k, m in clusters.items() if len(m["support"]) >= self.tau}
        for quirk in {q for q, _ in kept}:
            if (quirk, 1) in kept and (quirk, -1) in kept:
                weaker = -1 if len(kept[(quirk, 1)]["support"]) >= len(kept[(quirk, -1)]["support"]) else 1
                del kept[(quirk, weaker)]
        return self.by_section(s0, [(m, render(m)) for _, m in sorted(kept.items())])

    @staticmethod
    def by_section(s0: SkillFolder, lines: Sequence[tuple[dict, str]]) -> Patch:
        """One edit per quirk section (several add_section edits for one title would duplicate the section)."""
        per_quirk: dict[str, list] = {}
        for meta, line in lines:
            per_quirk.setdefault(meta["quirk"], []).append((meta, line))
        edits = [section_edit(s0, q, [line for _, line in items], {"quirk": q, "rules": [m for m, _ in items]})
                 for q, items in sorted(per_quirk.items())]
        return Patch(edits)


def sequential_proposer(current: SkillFolder, batch: Sequence[Lesson]) -> Patch:
    """Seq-B: the batch's lessons against the current skill, deduped within the batch and against its lines."""
    present = set(current.body.splitlines())
    seen, per_quirk = set(), {}
    for lesson in batch:
        if lesson.text in present or lesson.text in seen:
            continue
        seen.add(lesson.text)
        per_quirk.setdefault(lesson.quirk, []).append(lesson)
    return Patch([section_edit(current, q, [x.text for x in items], {"quirk": q})
                  for q, items in sorted(per_quirk.items())])


def evolve_trace2skill(s0_text: str, lessons: Sequence[Lesson], *, tau: int = 2, concatenate: bool = False,
                       fan_in: int = 5, max_levels: int = 5) -> EvolveResult:
    return map_reduce_evolve(skill_folder(s0_text), list(lessons), symbolic_map,
                             SymbolicMerge(tau=tau, concatenate=concatenate), fan_in=fan_in, max_levels=max_levels)


def evolve_sequential(s0_text: str, lessons: Sequence[Lesson], *, batch_size: int) -> EvolveResult:
    return sequential_evolve(skill_folder(s0_text), list(lessons), sequential_proposer, batch_size=batch_size)


def skill_folder(text: str) -> SkillFolder:
    return SkillFolder.from_text(text)


class BankContext:
    """The retrieval-bank baseline: the seed skill plus the BM25 top lessons for the task's text, in the same
    word budget as an evolved skill (the bank augments S0 rather than replacing it: our reading of 'the same
    512-token slot')."""

    def __init__(self, s0_text: str, lessons: Sequence[Lesson], budget_tokens: int):
        self.s0_text, self.budget = s0_text, int(budget_tokens)
        self.bank = ExperienceBank([x.text for x in lessons])

    def __call__(self, task_text: str) -> str:
        room = self.budget - rules.count_tokens(self.s0_text)
        extra = self.bank.retrieve(task_text, room, rules.count_tokens) if room > 0 else ""
        return (self.s0_text.rstrip("\n") + "\n" + extra).strip("\n") if extra else self.s0_text
