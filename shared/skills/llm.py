"""LLM-backed proposers for the evolvers (spec ../shared/papers/trace2skill.md 1.4-1.5), on a
shared.judges.http.ChatClient or anything with the same `chat(messages, **params) -> chat completion dict`.

  llm_map_fn        (s0, record) -> Patch | None            one call: a patch from one record (also usable as
                                                           sequential_evolve's propose_fn: a batch is a record)
  llm_merge_fn      (s0, patches, *, final) -> Patch | None  one call: several patches consolidated into one
  llm_translate_fn  (s0, patch) -> Patch                    one call per edit whose target is not found verbatim
  llm_fix_fn        (skill, problems) -> Patch | None        one call: a minimal patch fixing validate()'s problems
A reply is parsed as one JSON object {reasoning, edits, changelog_entries} (fenced or trailing-text JSON repaired
by shared.judges.rubric.extract_json); edits with an unknown op are dropped and counted in meta["dropped_edits"];
a failed request or a reply without such an object gives None. The prompts are our own wording of the paper's.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Callable, Sequence

from shared.judges.http import reply_text
from shared.judges.rubric import extract_json
from shared.judges.verdict import JudgeError
from shared.skills.folder import (ALLOWED_FRONT_KEYS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_REFERENCE_LINES,
                                  MAX_REFERENCES, MAX_SKILL_LINES, SkillFolder)
from shared.skills.patch import FILE_OPS, OPS, Edit, Patch, apply_patch

EDIT_SCHEMA = f"""Reply with one JSON object and nothing else:
{{"reasoning": "<briefly, why these edits>", "edits": [<edit>, ...], "changelog_entries": ["<one line per change>"]}}
An edit is {{"file": "SKILL.md" or "references/<name>.md", "op": "<op>", "target_section": "...", "target_text": "...",
"old_text": "...", "content": "...", "after_section": "..."}} with op one of {", ".join(OPS)}:
- insert_after / insert_before: content goes after / before the line holding target_text (searched inside
  target_section when given)
- append_to_section: content goes at the end of target_section
- replace_in_section: old_text inside target_section is replaced by content
- add_section: content is a whole new section, its Markdown header line first, placed after after_section (or at
  the end of the file)
- delete_section: target_section and its subsections are removed
- create: a new file whose text is content; delete_file: the file is removed
target_section is a header's title and target_text / old_text are pieces of the file, all copied verbatim: an edit
whose target is not found is skipped. Leave out the fields an op does not use."""

MAP_SYSTEM = """You improve an agent skill: a SKILL.md file of instructions, with optional reference files the agent
opens when needed. You are given the current skill and one record of lessons from one analysed agent run (causes
of a failure, lessons from a failure, or lessons from a success). Propose a small patch to the skill.

Principles:
- Prefer small additions to the existing text over rewriting it; keep what already works.
- Every change must follow from something the record shows; add nothing the record does not support.
- Write concrete instructions the agent can act on (exact commands, formats, conditions), and name the tempting
  wrong move as a "do not" when the record shows one.
- Make the skill stricter where it left room for this error; loosen it where it was needlessly rigid.
- Put long details in a reference file references/<name>.md created in this patch and linked from SKILL.md (both
  edits or neither).
- Do not repeat what the skill already says. Ignore one-off slips, infrastructure trouble and plain reasoning
  mistakes no instruction would prevent.
- Write from the agent's point of view: never mention expected answers, gold files or how runs are graded.
If the record teaches nothing new, return an empty list of edits.

""" + EDIT_SCHEMA

MERGE_SYSTEM = """You consolidate several patches proposed for the same agent skill, each written from a different
analysed run, into one patch that is applied to the original skill shown below.

Rules:
- Merge duplicate or overlapping edits into one, keeping the most specific, concrete wording.
- When patches contradict each other, keep the edit with the better justification, or write one that reconciles
  them.
- Keep every insight that only one patch has, unless a better-supported edit contradicts it.
- Output no more edits than there are distinct ideas among the inputs.
- All edits are applied together to the original skill: no two may touch the same lines, so combine edits aimed
  at the same place into one.
- A created reference file and the edit linking it stay together: keep both or drop both.
- Prevent recurring failures without discarding workflows that proved to work.

""" + EDIT_SCHEMA

FINAL_NOTE = "\n\nThis is the last merge: its patch is applied to the original skill as it is."

TRANSLATE_SYSTEM = """An edit to a skill file names where it applies by a section title and a piece of text, and
both must match the file verbatim. Given the file and an edit whose target was not found, rewrite the target
fields so that they match the file exactly (copy the header title and the text from the file), keeping the edit's
intent. Reply with one JSON object and nothing else:
{"target_section": "...", "target_text": "...", "old_text": "...", "after_section": "..."}"""

FIX_SYSTEM = f"""The agent skill below breaks the folder rules listed with it. Propose the smallest patch that
fixes every problem without losing guidance: move long parts of SKILL.md into a reference file (create it and link
it from SKILL.md in the same patch), merge or shorten overlong references, shorten the description.
The rules: front matter keys only {", ".join(ALLOWED_FRONT_KEYS)}; name in kebab-case, at most {MAX_NAME_CHARS}
characters; description at most {MAX_DESCRIPTION_CHARS} characters without '<' or '>'; SKILL.md under
{MAX_SKILL_LINES} lines; each reference under {MAX_REFERENCE_LINES} lines and directly in references/; at most
{MAX_REFERENCES} reference files.

""" + EDIT_SCHEMA


def skill_view(folder: SkillFolder) -> str:
    """The skill as a model sees it: SKILL.md in full, then the names of its other files."""
    files = sorted(folder.references)
    listing = "\n".join(f"- {p}" for p in files) if files else "(none)"
    return f"=== SKILL.md ===\n{folder.skill_md()}\n=== other files ===\n{listing}"


def as_json(obj) -> str:
    """A record (any JSON-able object, or a dataclass) as indented JSON text (unknown types as strings)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    return json.dumps(obj, indent=1, ensure_ascii=False, default=str)


def parse_patch_reply(text: str) -> Patch | None:
    """The first JSON object of the reply that has a list of edits, as a Patch (reasoning in meta; edits that are
    not objects or have an unknown op dropped and counted in meta["dropped_edits"]); None when there is none."""
    for obj in extract_json(text or ""):
        if not isinstance(obj.get("edits"), list):
            continue
        edits, dropped = [], 0
        for raw in obj["edits"]:
            try:
                edits.append(Edit.from_dict(raw))
            except ValueError:
                dropped += 1
        changelog = obj.get("changelog_entries", obj.get("changelog")) or []
        if isinstance(changelog, str):
            changelog = [changelog]
        meta = {"reasoning": str(obj.get("reasoning") or "")}
        if dropped:
            meta["dropped_edits"] = dropped
        return Patch(edits, [str(c) for c in changelog], meta)
    return None


def _ask(client, system: str, user: str, params: dict) -> str | None:
    """The reply text of one chat call, or None when the request or the reply fails."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    try:
        return reply_text(client.chat(messages, **params), getattr(client, "url", "chat"))[0]
    except JudgeError:
        return None


def llm_map_fn(client, *, temperature: float = 0.6, system_prompt: str | None = None, **params) -> Callable:
    """MAP: map(s0, record) -> Patch | None, one chat call seeing the skill and the record as JSON. params go to
    client.chat (max_tokens, top_p, ...); system_prompt replaces MAP_SYSTEM (e.g. a success-record variant)."""
    system = system_prompt or MAP_SYSTEM
    params = {"temperature": temperature, **params}

    def map_fn(s0: SkillFolder, record) -> Patch | None:
        user = f"{skill_view(s0)}\n\n=== record ===\n{as_json(record)}"
        return parse_patch_reply(_ask(client, system, user, params))

    return map_fn


def llm_merge_fn(client, *, temperature: float = 0.6, system_prompt: str | None = None, **params) -> Callable:
    """MERGE: merge(s0, patches, *, final=False) -> Patch | None, one chat call seeing the original skill and the
    numbered patches; final adds a note that the result is applied as it is."""
    system = system_prompt or MERGE_SYSTEM
    params = {"temperature": temperature, **params}

    def merge_fn(s0: SkillFolder, patches: Sequence[Patch], *, final: bool = False) -> Patch | None:
        shown = "\n\n".join(f"--- patch {k + 1} ---\n{as_json(_shown_patch(p))}" for k, p in enumerate(patches))
        user = f"{skill_view(s0)}\n\n=== {len(patches)} patches ===\n{shown}"
        return parse_patch_reply(_ask(client, system + (FINAL_NOTE if final else ""), user, params))

    return merge_fn


def _shown_patch(p: Patch) -> dict:
    """A patch as the merger sees it: edits without empty fields or meta, and its changelog."""
    edits = [{k: v for k, v in e.to_dict().items() if v and k != "meta"} for e in p.edits]
    return {"edits": edits, "changelog_entries": list(p.changelog)}


def llm_translate_fn(client, *, temperature: float = 0.0, **params) -> Callable:
    """TRANSLATE: translate(s0, patch) -> Patch; each text edit whose target is not found in s0 as written gets one
    call rewriting target_section / target_text / old_text / after_section to match the file verbatim (an edit
    that already applies costs no call; a failed call keeps the edit as it was)."""
    params = {"temperature": temperature, **params}

    def translate_fn(s0: SkillFolder, patch: Patch) -> Patch:
        edits = []
        for e in patch.edits:
            if e.op in FILE_OPS or apply_patch(s0, Patch([e]))[1][0].endswith(": applied"):
                edits.append(e)
                continue
            text = s0.skill_md() if e.file == "SKILL.md" else s0.references.get(e.file, "")
            user = f"=== {e.file} ===\n{text}\n\n=== edit ===\n{as_json(e.to_dict())}"
            fields = next(iter(extract_json(_ask(client, TRANSLATE_SYSTEM, user, params) or "")), None)
            if fields is None:
                edits.append(e)
                continue
            keep = ("target_section", "target_text", "old_text", "after_section")
            edits.append(dataclasses.replace(e, **{k: str(fields[k]) for k in keep if fields.get(k) is not None}))
        return Patch(edits, list(patch.changelog), dict(patch.meta))

    return translate_fn


def llm_fix_fn(client, *, temperature: float = 0.0, **params) -> Callable:
    """VERIFY: fix(skill, problems) -> Patch | None, one call seeing the skill, its reference sizes and the
    problems."""
    params = {"temperature": temperature, **params}

    def fix_fn(skill: SkillFolder, problems: Sequence[str]) -> Patch | None:
        sizes = "\n".join(f"- {p}: {len(t.splitlines())} lines" for p, t in sorted(skill.references.items()))
        user = (f"{skill_view(skill)}\n\n=== file sizes ===\n{sizes or '(no other files)'}\n\n=== problems ===\n"
                + "\n".join(f"- {p}" for p in problems))
        return parse_patch_reply(_ask(client, FIX_SYSTEM, user, params))

    return fix_fn
