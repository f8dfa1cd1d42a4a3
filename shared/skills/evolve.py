"""Skill evolution from many lessons (spec ../shared/papers/trace2skill.md 1.4-1.6).

  map_reduce_evolve   Trace2Skill: one patch per record against the frozen S0 (MAP), hierarchical merging in
                      groups of fan_in for at most max_levels levels then one forced merge (REDUCE), optional
                      translation, sanitize, apply to S0, up to verify_rounds of validate-and-fix
  sequential_evolve   the sequential baseline: batches in order, each patch proposed against and applied to the
                      current skill at once, rolled back when it makes the skill invalid

The LLM pieces are callables, so a symbolic operator and a ChatClient-backed one (shared/skills/llm.py) plug in
alike:
  map_fn(s0, record) -> Patch | None
  merge_fn(s0, patches, *, final: bool) -> Patch | None     None: the merge failed (its inputs pass through)
  translate_fn(s0, patch) -> Patch | None                   rewrite targets to match S0 verbatim
  fix_fn(skill, problems) -> Patch | None                    a minimal patch fixing validate()'s problems
  propose_fn(current_skill, batch) -> Patch | None
The merge that leaves one patch is always called with final=True, exactly once when merges succeed, so a merge
function can apply end-of-evolution filters (e.g. a prevalence threshold) there and only there.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from typing import Callable, Sequence

from shared.skills.folder import SkillFolder, validate
from shared.skills.patch import Patch, apply_patch, balanced_chunks, drop_unpaired_creates, sanitize

VERIFY_ROUNDS = 3


@dataclasses.dataclass
class EvolveResult:
    """An evolved skill, the patch applied to S0 (None when nothing was applied), the log, and the reduce counters
    (sequential_evolve: levels = batches, merge_calls = proposals, failed_merges = batches not applied)."""
    skill: SkillFolder
    patch: Patch | None
    log: list[str]
    levels: int
    merge_calls: int
    failed_merges: int


def _map_in_order(fn: Callable, items: Sequence, workers: int) -> list:
    if workers > 1 and len(items) > 1:
        with concurrent.futures.ThreadPoolExecutor(min(workers, len(items))) as pool:
            return list(pool.map(fn, items))
    return [fn(x) for x in items]


def _verify(skill: SkillFolder, fix_fn: Callable | None, rounds: int, log: list[str]) -> SkillFolder:
    """Up to `rounds` of: validate, and when there are problems ask fix_fn for a patch and apply it."""
    for k in range(rounds):
        problems = validate(skill)
        if not problems:
            return skill
        log.append(f"verify round {k + 1}: {len(problems)} problem(s): " + "; ".join(problems))
        if fix_fn is None:
            return skill
        fix = fix_fn(skill, problems)
        if fix is None:
            log.append(f"verify round {k + 1}: no fix patch")
            return skill
        skill, applied = apply_patch(skill, sanitize(fix, skill))
        log.extend(f"fix {k + 1}: {line}" for line in applied)
    problems = validate(skill)
    if problems:
        log.append(f"still invalid after {rounds} fix round(s): " + "; ".join(problems))
    return skill


def map_reduce_evolve(s0: SkillFolder, records: Sequence, map_fn: Callable, merge_fn: Callable, *, fan_in: int = 5,
                      max_levels: int = 5, workers: int = 1, translate_fn: Callable | None = None,
                      fix_fn: Callable | None = None, verify_rounds: int = VERIFY_ROUNDS) -> EvolveResult:
    """Trace2Skill's parallel evolution (spec 1.5; module docstring for the callables). MAP runs map_fn on every
    record against the frozen s0 (a thread pool of `workers`, order kept; None results dropped, then orphaned
    creates / links and empty patches). REDUCE: while more than one patch remains and fewer than max_levels levels
    ran, the patches are grouped by balanced_chunks(P, fan_in) and each group of two or more is merged (a failed
    merge, None, passes its group through); a level with a single group is the final one (final=True). Patches
    left after max_levels get one forced final merge (falling back to the first patch); a lone patch still gets
    its final merge. The result is translated (translate_fn), sanitized, applied to s0 and verified."""
    if fan_in < 2:
        raise ValueError(f"map_reduce_evolve: fan_in must be >= 2, got {fan_in}")
    log: list[str] = []
    mapped = _map_in_order(lambda r: map_fn(s0, r), list(records), workers)
    patches = [p for p in mapped if p is not None]
    log.append(f"map: {len(records)} record(s) -> {len(patches)} patch(es)")
    before = sum(len(p.edits) for p in patches)
    patches = [p for p in drop_unpaired_creates(patches, s0.references) if p.edits]
    after = sum(len(p.edits) for p in patches)
    if after < before:
        log.append(f"map: {before - after} unpaired create/link edit(s) dropped")
    if not patches:
        log.append("no patches: the skill is unchanged")
        return EvolveResult(s0, None, log, 0, 0, 0)

    level = calls = failed = finals = 0
    lock = threading.Lock()   # merges of one level may run in threads

    def merge(group: list[Patch], final: bool) -> list[Patch]:
        nonlocal calls, failed, finals
        if len(group) == 1:
            return group
        merged = merge_fn(s0, group, final=final)
        with lock:
            calls += 1
            failed += merged is None
            finals += final and merged is not None
        return group if merged is None else [merged]

    while len(patches) > 1 and level < max_levels:
        level += 1
        groups = balanced_chunks(patches, fan_in)
        final = len(groups) == 1
        outputs = _map_in_order(lambda g: merge(g, final), groups, workers)
        patches = [p for out in outputs for p in out]
        log.append(f"level {level}: groups {[len(g) for g in groups]} -> {len(patches)} patch(es)"
                   + (" (final merge)" if final else ""))
    if len(patches) > 1:
        log.append(f"forced final merge of {len(patches)} patches after {level} level(s)")
        out = merge(patches, True)
        if len(out) > 1:
            log.append("forced merge failed: keeping the first patch")
        patches = out[:1]
    elif finals == 0:
        calls += 1   # a lone patch (one record, or inputs that never merged) still gets its final pass
        merged = merge_fn(s0, patches, final=True)
        if merged is None:
            failed += 1
            log.append("final merge of the lone patch failed: keeping it as it is")
        else:
            patches = [merged]
    patch = patches[0]

    if translate_fn is not None:
        translated = translate_fn(s0, patch)
        if translated is None:
            log.append("translation failed: applying the untranslated patch")
        else:
            patch = translated
    clean = sanitize(patch, s0)
    if len(clean.edits) < len(patch.edits):
        log.append(f"sanitize: {len(patch.edits) - len(clean.edits)} edit(s) dropped")
    skill, applied = apply_patch(s0, clean)
    log.extend(f"apply: {line}" for line in applied)
    skill = _verify(skill, fix_fn, verify_rounds, log)
    return EvolveResult(skill, clean, log, level, calls, failed)


def sequential_evolve(s0: SkillFolder, records: Sequence, propose_fn: Callable, *, batch_size: int = 1,
                      fix_fn: Callable | None = None) -> EvolveResult:
    """The sequential baseline (spec 1.6): records in batches of batch_size, in order; propose_fn(current, batch)
    gives a patch that is sanitized and applied to the current skill at once. A result with validate() problems
    the current skill did not have is fixed with fix_fn (up to 3 rounds) when given, else rolled back to the
    snapshot (logged); problems S0 already had do not block every batch."""
    if batch_size < 1:
        raise ValueError(f"sequential_evolve: batch_size must be >= 1, got {batch_size}")
    records = list(records)
    current, log = s0, []
    batches = proposals = rejected = 0
    for start in range(0, len(records), batch_size):
        batches += 1
        head = f"batch {batches} (records {start}..{min(start + batch_size, len(records)) - 1})"
        proposals += 1
        patch = propose_fn(current, records[start:start + batch_size])
        if patch is None or not patch.edits:
            log.append(f"{head}: no patch")
            continue
        candidate, applied = apply_patch(current, sanitize(patch, current))
        log.extend(f"{head}: {line}" for line in applied)
        known = set(validate(current))
        new = [p for p in validate(candidate) if p not in known]
        if new and fix_fn is not None:
            fix_log: list[str] = []
            candidate = _verify(candidate, fix_fn, VERIFY_ROUNDS, fix_log)
            log.extend(f"{head}: {line}" for line in fix_log)
            new = [p for p in validate(candidate) if p not in known]
        if new:
            rejected += 1
            log.append(f"{head}: rolled back ({'; '.join(new)})")
            continue
        current = candidate
    return EvolveResult(current, None, log, batches, proposals, rejected)
