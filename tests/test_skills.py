"""shared.skills: folder model and validator, patch ops and filters, the map/reduce and sequential evolvers, the
experience bank and the LLM proposers on a scripted client. Pure Python, fast."""
import json

import pytest

from shared.judges.verdict import JudgeError
from shared.skills.bank import ExperienceBank
from shared.skills.evolve import map_reduce_evolve, sequential_evolve
from shared.skills.folder import (Section, SkillFolder, find_section, load_skill_folder, save_skill_folder, sections,
                                  validate)
from shared.skills.llm import llm_fix_fn, llm_map_fn, llm_merge_fn, llm_translate_fn
from shared.skills.patch import (OPS, Edit, Patch, apply_patch, balanced_chunks, drop_unpaired_creates, line_disjoint,
                                 sanitize)

FRONT = "---\nname: tiny-sheet\ndescription: Work with small sheets.\n---\n"
BODY = """# Guide

Intro.

## Read

Read the header.
Check totals.

### Dates

Day first.

## Write

Stay in range."""


def skill(body=BODY, references=None, protected=()):
    return SkillFolder.from_text(FRONT + body + "\n", references, protected)


def applied(edit, folder=None):
    folder = folder or skill()
    out, log = apply_patch(folder, Patch([edit]))
    assert log[0].endswith(": applied"), log
    return out


# ---------------------------------------------------------------- folder


def test_sections_nested_and_fenced():
    body = "# A\nx\n## B\n```\n# not a header\n## nor this\n```\n### C\ny\n## D\n#E is text\n# F\nz"
    assert sections(body) == [Section(1, "A", 0, 11), Section(2, "B", 2, 9), Section(3, "C", 7, 9),
                              Section(2, "D", 9, 11), Section(1, "F", 11, 13)]
    assert find_section(body, "##   D ") == Section(2, "D", 9, 11)
    assert find_section(body, "c") == Section(3, "C", 7, 9)      # case is the fallback, after an exact match
    assert find_section(body, "not a header") is None


def test_front_matter_round_trip():
    folder = SkillFolder.from_text(FRONT + BODY, {"references/a.md": "A\n"})
    assert folder.front == {"name": "tiny-sheet", "description": "Work with small sheets."}
    assert folder.body == BODY
    assert folder.skill_md() == FRONT + BODY + "\n"
    odd = SkillFolder({"name": "x", "description": "true", "metadata": "[x", "license": 3}, "b")
    assert SkillFolder.from_text(odd.skill_md()).front == odd.front


def test_load_save_round_trip(tmp_path):
    folder = skill(references={"references/a.md": "A\n", "references/b.md": "B\n", "LICENSE.txt": "L\n"})
    save_skill_folder(folder, str(tmp_path))
    loaded = load_skill_folder(str(tmp_path), protected=("LICENSE.txt",))
    assert (loaded.front, loaded.body, loaded.references) == (folder.front, folder.body, folder.references)
    assert loaded.protected == ("LICENSE.txt",)
    del loaded.references["references/b.md"]
    save_skill_folder(loaded, str(tmp_path))
    assert sorted(p.name for p in (tmp_path / "references").iterdir()) == ["a.md"]
    assert (tmp_path / "LICENSE.txt").exists()


def test_validate_each_rule():
    ok = skill(references={f"references/r{i}.md": "text\n" for i in range(5)})
    assert validate(ok) == []

    def problems(front=None, body=BODY, references=None):
        f = ok.copy()
        f.front = {**f.front, **(front or {})}
        f.body = body
        f.references = references if references is not None else {}
        return validate(f)

    cases = {
        "not allowed": problems({"author": "me"}),
        "kebab-case": problems({"name": "Tiny_Sheet"}),
        "at most 64": problems({"name": "a" * 65}),
        "at most 1024": problems({"description": "d" * 1025}),
        "'<' or '>'": problems({"description": "use <b>"}),
        "fewer than 500": problems(body="x\n" * 496),
        "fewer than 300": problems(references={"references/long.md": "x\n" * 300}),
        "one level deep": problems(references={"references/a/b.md": "x\n"}),
        "at most 5": problems(references={f"references/r{i}.md": "x\n" for i in range(6)}),
    }
    for rule, found in cases.items():
        assert len(found) == 1 and rule in found[0], (rule, found)
    assert problems(body="x\n" * 495) == []                    # 495 body lines + 4 front matter lines = 499
    missing = ok.copy()
    missing.front = {"description": "d"}
    assert validate(missing) == ["SKILL.md: front matter has no name"]


# ---------------------------------------------------------------- patch ops


def test_insert_after_and_before():
    after = applied(Edit("insert_after", target_section="## Read", target_text="the header", content="Then types."))
    assert after.body == BODY.replace("Read the header.\n", "Read the header.\nThen types.\n")
    before = applied(Edit("insert_before", target_text="Check   totals.", content="A\nB\n"))
    assert before.body == BODY.replace("Check totals.", "A\nB\nCheck totals.")


def test_append_to_section_goes_after_subsections():
    out = applied(Edit("append_to_section", target_section="Read", content="Last rule."))
    assert out.body == BODY.replace("Day first.\n", "Day first.\nLast rule.\n")
    out = applied(Edit("append_to_section", target_section="write", content="Never overwrite."))
    assert out.body == BODY + "\nNever overwrite."


def test_replace_in_section():
    out = applied(Edit("replace_in_section", target_section="Dates", old_text="Day first", content="Day first (dmy)"))
    assert out.body == BODY.replace("Day first.", "Day first (dmy).")
    multi = applied(Edit("replace_in_section", old_text="header.\nCheck", content="header row.\nAlways check"))
    assert multi.body == BODY.replace("header.\nCheck", "header row.\nAlways check")


def test_add_section():
    out = applied(Edit("add_section", after_section="Read", content="## Numbers\nStrip commas."))
    assert out.body == BODY.replace("Day first.\n", "Day first.\n\n## Numbers\nStrip commas.\n")
    end = applied(Edit("add_section", content="## Numbers\nStrip commas.\n"))
    assert end.body == BODY + "\n\n## Numbers\nStrip commas."
    missing = apply_patch(skill(), Patch([Edit("add_section", after_section="Nope", content="## N\nx")]))[0]
    assert missing.body == end.body.replace("Numbers\nStrip commas.", "N\nx")   # not found: at the end


def test_delete_section():
    out = applied(Edit("delete_section", target_section="Read"))
    assert out.body == "# Guide\n\nIntro.\n\n## Write\n\nStay in range."
    last = applied(Edit("delete_section", target_section="Write"))
    assert last.body == BODY[:BODY.index("\n\n## Write")]


def test_create_and_delete_file():
    folder = skill(references={"references/old.md": "old\n"})
    out, log = apply_patch(folder, Patch([Edit("create", file="references/new.md", content="# New\nx"),
                                          Edit("delete_file", file="references/old.md"),
                                          Edit("append_to_section", file="references/new.md", target_section="New",
                                               content="y")]))
    assert out.references == {"references/new.md": "# New\nx\ny\n"}
    assert folder.references == {"references/old.md": "old\n"}          # the input folder is untouched
    assert all(line.endswith("applied") for line in log)


def test_unmatched_targets_are_skipped_and_logged():
    edits = [Edit("insert_after", target_text="no such text", content="x"),
             Edit("insert_after", target_section="Write", target_text="Day first", content="x"),
             Edit("append_to_section", target_section="Missing", content="x"),
             Edit("replace_in_section", old_text="absent", content="x"),
             Edit("delete_section", target_section="Missing"),
             Edit("delete_file", file="references/none.md"),
             Edit("add_section", content="no header"),
             Edit("append_to_section", target_section="Read", content="kept")]
    out, log = apply_patch(skill(), Patch(edits))
    assert out.body == BODY.replace("Day first.\n", "Day first.\nkept\n")
    assert [line.split(": ", 1)[1].split(" (")[0] for line in log] == ["skipped"] * 7 + ["applied"]
    assert "target_text 'Day first' not found in section 'Write'" in log[1]
    assert "section 'Missing' not found" in log[2]


def test_protected_files_are_refused():
    folder = skill(references={"recalc.py": "print(1)\n"}, protected=("recalc.py", "LICENSE.txt"))
    out, log = apply_patch(folder, Patch([Edit("create", file="LICENSE.txt", content="mine"),
                                          Edit("delete_file", file="recalc.py"),
                                          Edit("replace_in_section", file="recalc.py", old_text="1", content="2")]))
    assert out.references == folder.references
    assert all("skipped (protected file)" in line for line in log)


def test_edit_and_patch_dicts():
    p = Patch.from_dict({"edits": [{"op": "create", "file": "references/x.md", "content": "x", "why": "ignored"},
                                   {"op": "append_to_section", "target_section": "Read", "content": "y",
                                    "file": None}],
                         "changelog_entries": ["one"]})
    assert p.edits[1].file == "SKILL.md"
    assert Patch.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    with pytest.raises(ValueError, match="rewrite_all"):
        Edit.from_dict({"op": "rewrite_all"})
    assert len(OPS) == 8


# ---------------------------------------------------------------- filters


def test_balanced_chunks():
    sizes = lambda n, m: [len(g) for g in balanced_chunks(list(range(n)), m)]  # noqa: E731
    assert balanced_chunks(list(range(12)), 5) == [[0, 1, 2, 3, 4, 10], [5, 6, 7, 8, 9, 11]]
    assert sizes(13, 5) == [5, 5, 3]
    assert sizes(4, 5) == [4]
    assert sizes(10, 5) == [5, 5]
    assert sizes(11, 5) == [6, 5]
    assert sizes(14, 4) == [4, 4, 4, 2]      # remainder 2 = m/2: its own group
    assert balanced_chunks([], 5) == []


def test_drop_unpaired_creates_both_directions():
    create = Edit("create", file="references/x.md", content="details")
    link = Edit("append_to_section", target_section="Read", content="See references/x.md.")
    other = Edit("append_to_section", target_section="Read", content="plain")
    dangling = Edit("append_to_section", target_section="Write", content="See references/gone.md")
    existing = Edit("append_to_section", target_section="Write", content="See references/old.md")
    out = drop_unpaired_creates([Patch([create, link]), Patch([create, other]), Patch([link, other]),
                                 Patch([dangling, existing, other])], existing={"references/old.md"})
    assert [p.edits for p in out] == [[create, link], [other], [other], [existing, other]]
    # dropping a link that also names a missing file orphans its create, which then goes too
    both = Edit("append_to_section", target_section="Read", content="references/x.md and references/gone.md")
    assert drop_unpaired_creates([Patch([create, both])])[0].edits == []


def test_sanitize():
    folder = skill(references={"references/old.md": "o\n"})
    bad_op = Edit("rewrite_all")
    keep = Edit("append_to_section", target_section="Read", content="see references/old.md")
    gone = Edit("append_to_section", target_section="Read", content="see references/new.md")
    create = Edit("create", file="references/new.md", content="n")
    assert sanitize(Patch([bad_op, keep, gone]), folder).edits == [keep]
    assert sanitize(Patch([keep, gone, create]), folder).edits == [keep, gone, create]


def test_line_disjoint():
    folder = skill()
    a = Edit("insert_after", target_text="Read the header.", content="x")
    b = Edit("replace_in_section", target_section="Dates", old_text="Day first", content="y")
    c = Edit("append_to_section", target_section="Write", content="z")
    assert line_disjoint(folder, [a, b, c])
    assert not line_disjoint(folder, [a, Edit("replace_in_section", old_text="the header", content="w")])
    assert not line_disjoint(folder, [b, Edit("delete_section", target_section="Read")])
    assert not line_disjoint(folder, [b, Edit("append_to_section", target_section="Read", content="v")])
    assert line_disjoint(folder, [Edit("add_section", content="## N\nn"), Edit("add_section", content="## M\nm")])
    assert line_disjoint(folder, [a, Edit("insert_after", target_text="not there", content="x")])
    assert not line_disjoint(folder, [Edit("create", file="references/n.md", content="1"),
                                      Edit("create", file="references/n.md", content="2")])


# ---------------------------------------------------------------- evolvers


def rule_patch(s0, i):
    return Patch([Edit("append_to_section", target_section="Write", content=f"rule {i}")], [f"r{i}"])


class Merger:
    """Concatenates the edits; records (group size, final) per call; fails the calls listed in `fail`."""

    def __init__(self, fail=()):
        self.calls, self.fail = [], set(fail)

    def __call__(self, s0, patches, *, final=False):
        self.calls.append((len(patches), final))
        if len(self.calls) in self.fail:
            return None
        return Patch([e for p in patches for e in p.edits], [c for p in patches for c in p.changelog])


def rules_in(result):
    return [line for line in result.skill.body.splitlines() if line.startswith("rule ")]


def test_map_reduce_levels_and_final_merge():
    merger = Merger()
    result = map_reduce_evolve(skill(), range(12), rule_patch, merger, fan_in=5)
    assert (result.levels, result.merge_calls, result.failed_merges) == (2, 3, 0)
    assert merger.calls == [(6, False), (6, False), (2, True)]
    assert rules_in(result) == [f"rule {i}" for i in (0, 1, 2, 3, 4, 10, 5, 6, 7, 8, 9, 11)]
    assert any(line.startswith("level 1: groups [6, 6]") for line in result.log)
    threaded = map_reduce_evolve(skill(), range(12), rule_patch, Merger(), fan_in=5, workers=3)
    assert rules_in(threaded) == rules_in(result)


def test_failed_merge_passes_inputs_through():
    merger = Merger(fail={1})
    result = map_reduce_evolve(skill(), range(12), rule_patch, merger, fan_in=5)
    # level 1: the first group fails (6 patches pass), the second merges -> 7; level 2: one group of 7, final
    assert merger.calls == [(6, False), (6, False), (7, True)]
    assert (result.levels, result.merge_calls, result.failed_merges) == (2, 3, 1)
    assert sorted(rules_in(result)) == sorted(f"rule {i}" for i in range(12))


def test_forced_merge_when_levels_run_out():
    merger = Merger()
    result = map_reduce_evolve(skill(), range(30), rule_patch, merger, fan_in=5, max_levels=1)
    assert merger.calls == [(5, False)] * 6 + [(6, True)]
    assert (result.levels, result.merge_calls) == (1, 7)
    assert sum(final for _, final in merger.calls) == 1
    failing = Merger(fail={7})
    fallback = map_reduce_evolve(skill(), range(30), rule_patch, failing, fan_in=5, max_levels=1)
    assert rules_in(fallback) == [f"rule {i}" for i in range(5)]          # the first patch
    assert fallback.failed_merges == 1


def test_one_record_gets_one_final_merge_and_none_results_drop():
    merger = Merger()
    result = map_reduce_evolve(skill(), [7], rule_patch, merger)
    assert merger.calls == [(1, True)] and result.levels == 0 and rules_in(result) == ["rule 7"]
    merger = Merger()
    result = map_reduce_evolve(skill(), range(4), lambda s0, r: None if r else rule_patch(s0, r), merger)
    assert merger.calls == [(1, True)] and rules_in(result) == ["rule 0"]
    empty = map_reduce_evolve(skill(), range(3), lambda s0, r: None, merger)
    assert empty.patch is None and empty.skill.body == BODY


def test_map_reduce_translate_sanitize_and_verify():
    def map_fn(s0, r):
        assert s0.body == BODY                                               # always the frozen S0
        return Patch([Edit("append_to_section", target_section="Writing", content=f"rule {r}")])

    def translate(s0, patch):
        return Patch([Edit(e.op, target_section=e.target_section.replace("Writing", "Write"), content=e.content)
                      for e in patch.edits])

    def bulky(s0, patches, *, final=False):
        edits = [e for p in patches for e in p.edits]
        if final:   # a link to a reference nobody creates, and a section too long for the line limit
            edits += [Edit("append_to_section", target_section="Read", content="see references/none.md"),
                      Edit("add_section", content="## Bulk\n" + "x\n" * 600)]
        return Patch(edits)

    problems_seen = []

    def fix(skill_, problems):
        problems_seen.extend(problems)
        return Patch([Edit("delete_section", target_section="Bulk")])

    result = map_reduce_evolve(skill(), range(3), map_fn, bulky, translate_fn=translate, fix_fn=fix)
    assert rules_in(result) == ["rule 0", "rule 1", "rule 2"]
    assert "references/none.md" not in result.skill.body
    assert "sanitize: 1 edit(s) dropped" in result.log
    assert len(problems_seen) == 1 and "fewer than 500" in problems_seen[0]
    assert validate(result.skill) == [] and "## Bulk" not in result.skill.body
    unfixed = map_reduce_evolve(skill(), range(3), map_fn, bulky, translate_fn=translate)
    assert any("fewer than 500" in line for line in unfixed.log) and "## Bulk" in unfixed.skill.body


def test_sequential_applies_in_order_and_rolls_back():
    seen = []

    def propose(current, batch):
        seen.append(len(rules_in_body(current.body)))
        if "BIG" in batch:
            return Patch([Edit("add_section", content="## Bulk\n" + "x\n" * 600)])
        return Patch([Edit("append_to_section", target_section="Write", content="rule " + " ".join(batch))])

    result = sequential_evolve(skill(), ["a", "b", "BIG", "c", "d"], propose, batch_size=2)
    assert seen == [0, 1, 1]                        # each batch sees the current skill
    assert rules_in_body(result.skill.body) == ["rule a b", "rule d"]
    assert (result.levels, result.merge_calls, result.failed_merges) == (3, 3, 1)
    assert any("batch 2" in line and "rolled back" in line for line in result.log)
    fixed = sequential_evolve(skill(), ["BIG"], propose,
                              fix_fn=lambda s, p: Patch([Edit("delete_section", target_section="Bulk")]))
    assert fixed.failed_merges == 0 and validate(fixed.skill) == []


def rules_in_body(body):
    return [line for line in body.splitlines() if line.startswith("rule ")]


# ---------------------------------------------------------------- experience bank


def test_experience_bank_budget_and_order():
    lessons = ["strip commas before summing",                       # 4 words, one query word
               "the totals row is not data skip it",                # 8 words, none
               "numbers with commas are text parse the numbers",    # 8 words, both query words
               "dates may be day first",
               "strip commas before summing"]                       # a duplicate: never repeated
    bank = ExperienceBank(lessons)
    words = lambda text: len(text.split())  # noqa: E731
    assert bank.retrieve("commas numbers", 100, words) == lessons[2] + "\n" + lessons[0]   # best first
    assert bank.retrieve("commas numbers", 12, words) == lessons[2] + "\n" + lessons[0]
    assert bank.retrieve("commas numbers", 11, words) == lessons[2]
    assert bank.retrieve("commas numbers", 7, words) == lessons[0]  # the best does not fit: the next one does
    assert bank.retrieve("commas numbers", 3, words) == ""
    assert bank.retrieve("unrelated query", 100, words) == ""
    assert ExperienceBank([]).retrieve("commas", 100, words) == ""


# ---------------------------------------------------------------- LLM proposers


class FakeClient:
    """ChatClient's chat(messages, **params) -> chat completion, replaying scripted replies."""
    url = "fake://chat"

    def __init__(self, replies):
        self.replies, self.requests = list(replies), []

    def chat(self, messages, **params):
        self.requests.append((messages, params))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return {"choices": [{"message": {"role": "assistant", "content": reply}}]}


MAP_REPLY = """Here is the patch:
```json
{"reasoning": "commas broke the sum",
 "edits": [{"file": "SKILL.md", "op": "append_to_section", "target_section": "Read",
            "content": "Strip thousands separators before summing."},
           {"op": "rewrite_everything", "content": "x"}],
 "changelog_entries": ["commas rule"]}
```
Hope this helps."""


def test_llm_map_fn_parses_and_handles_malformed():
    client = FakeClient([MAP_REPLY, "no JSON here at all", "{'edits': [{'op': 'delete_section', "
                         "'target_section': 'Dates',}], reasoning: 'r'} trailing", JudgeError("down")])
    map_fn = llm_map_fn(client, max_tokens=512)
    patch = map_fn(skill(), {"instance_id": "t1", "items": [{"type": "failure_memory", "content": "commas"}]})
    assert [e.op for e in patch.edits] == ["append_to_section"]
    assert patch.changelog == ["commas rule"] and patch.meta["dropped_edits"] == 1
    messages, params = client.requests[0]
    assert params == {"temperature": 0.6, "max_tokens": 512}
    assert "## Read" in messages[1]["content"] and '"instance_id": "t1"' in messages[1]["content"]
    assert "gold" in messages[0]["content"]                 # the principles forbid mentioning gold answers
    assert map_fn(skill(), {"x": 1}) is None                # malformed reply
    repaired = map_fn(skill(), {"x": 2})                    # single quotes, trailing comma, trailing text
    assert repaired.edits == [Edit("delete_section", target_section="Dates")]
    assert map_fn(skill(), {"x": 3}) is None                # the request failed


def test_llm_merge_fn_in_the_evolver():
    merged = json.dumps({"reasoning": "dedupe", "edits": [
        {"op": "append_to_section", "target_section": "Write", "content": "rule merged"}], "changelog_entries": []})
    client = FakeClient([merged, "garbage"])
    merge_fn = llm_merge_fn(client)
    result = map_reduce_evolve(skill(), range(3), rule_patch, merge_fn)
    assert rules_in(result) == ["rule merged"]
    system, user = (m["content"] for m in client.requests[0][0])
    assert "last merge" in system and "--- patch 3 ---" in user and "rule 2" in user
    assert merge_fn(skill(), [rule_patch(None, 0), rule_patch(None, 1)]) is None
    assert "last merge" not in client.requests[1][0][0]["content"]


def test_llm_translate_and_fix():
    client = FakeClient(['{"target_section": "Dates", "old_text": "Day first"}'])
    translate = llm_translate_fn(client)
    good = Edit("append_to_section", target_section="Read", content="ok")
    off = Edit("replace_in_section", target_section="dates section", old_text="day-first", content="Day first (dmy)")
    out = translate(skill(), Patch([good, off]))
    assert len(client.requests) == 1                       # the edit that already applies costs no call
    assert out.edits[0] == good and applied(out.edits[1]).body == BODY.replace("Day first.", "Day first (dmy).")
    fix_client = FakeClient(['{"edits": [{"op": "delete_section", "target_section": "Bulk"}]}'])
    fix = llm_fix_fn(fix_client)(skill(), ["SKILL.md: 620 lines (must be fewer than 500)"])
    assert fix.edits == [Edit("delete_section", target_section="Bulk")]
    assert "620 lines" in fix_client.requests[0][0][1]["content"]
