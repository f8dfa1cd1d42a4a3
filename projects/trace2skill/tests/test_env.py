"""TinySheet, the rule library, the teacher agent and the analysts against hand-computed values and the properties
the reproduction relies on: quirk prevalence, the 'passes iff every needed flag and no harmful extra' contract,
rule lines that round-trip, the budget, the agent's reading of each rule kind, and the agentic analyst's edge over
the single call."""
import collections
import dataclasses

import numpy as np

from projects.trace2skill import agent, analysts, rules
from projects.trace2skill import tinysheet as ts

N = 500                                     # tasks per family (cached by make_tasks across the tests)


def tasks(family, split="evolve", seed=11):
    return ts.make_tasks(N, family, seed, split)


def zero_profile(**kw):
    """A profile with no prior: every flag it uses comes from a rule."""
    return agent.AgentProfile("Z", {q: 0.0 for q in ts.QUIRKS}, p_vague=kw.get("p_vague", 0.0))


def skill(*lines):
    return rules.FRONT_MATTER + "# TinySheet\n\n## Rules\n" + "\n".join(lines) + "\n"


def test_generator_frequencies_and_cues():
    for family in ts.FAMILIES:
        ts_ = tasks(family)
        counts = collections.Counter(q for t in ts_ for q in t.quirks)
        for q in ts.FAMILY_QUIRKS[family]:
            assert 0.14 <= counts[q] / N <= 0.27, (family, q, counts[q] / N)
        assert "range_write" not in counts or family == "cell"
        sizes = collections.Counter(len(t.quirks) for t in ts_)
        assert set(sizes) <= {0, 1, 2, 3} and 0.15 <= sizes[0] / N <= 0.25
        for t in ts_:
            assert len(t.variants) == 3 and len({v.rows for v in t.variants}) == 3      # values differ
            assert len({len(v.rows) for v in t.variants}) == 1 and all(len(v.rows) <= 12 for v in t.variants)
            assert all(len(r) <= 6 for v in t.variants for r in v.rows)
            for q in t.quirks:                                                       # a cue whenever the quirk
                assert any(t.features[c] for c in ts.CUES[q]), (t.task_id, q)
            assert t.features == ts.detect_features(t.variants[0], t.shown_position)
            assert t.task_id in ts.task_text(t) and t.instruction in ts.task_text(t)
        # distractors: cues without their quirk, roughly 10% per quirk
        for q in ts.FAMILY_QUIRKS[family]:
            without = [t for t in ts_ if q not in t.quirks]
            rate = np.mean([any(t.features[c] for c in ts.CUES[q]) for t in without])
            assert 0.04 <= rate <= 0.18, (family, q, rate)


def test_check_passes_iff_needed_flags_and_no_harmful_extra():
    rng = np.random.default_rng(0)
    for family in ts.FAMILIES:
        for t in tasks(family)[:300]:
            gold = ts.gold_flags(t)
            assert ts.check(t, gold)
            for f in gold:                                   # a missing needed flag fails
                assert not ts.check(t, gold - {f}), (t.task_id, f)
            for f in set(ts.FLAGS) - gold:                   # extras: harmful ones fail, the rest are no-ops
                assert ts.check(t, gold | {f}) == (f not in ts.HARMFUL), (t.task_id, f)
            for _ in range(4):                               # arbitrary flag sets
                s = frozenset(f for f in ts.FLAGS if rng.random() < 0.5)
                assert ts.check(t, s) == (gold <= s and not (s & ts.HARMFUL) - gold)


HAND = ts.Sheet("H/1", (
    ("Sales", "", "", "", ""),
    ("Item", "Region", "Units", "Date", "Share"),
    (" apple", "north", "1,200", "05/03/2023", "10%"),
    ("PEAR", "south", "300", "2023-03-09", "20%"),
    ("", "", "", "", ""),
    ("plum ", "North", "2 000", "2023-04-01", "30%"),
    ("Total", "", "3,500", "", "100%"),
))
ALL = frozenset({"header=2", "parse=num", "sections", "skip_total", "date=dmy", "norm_key", "pct"})


def run(op, flags=ALL, **kw):
    return ts.execute(HAND, ts.Program(op, flags=frozenset(flags), **kw))


def test_execute_each_op_on_a_hand_sheet():
    assert run("SUM", column="Units") == 3500.0
    assert run("SUM", ALL - {"parse=num"}, column="Units") == 300.0          # 1,200 and 2 000 dropped
    assert run("SUM", ALL - {"skip_total"}, column="Units") == 7000.0        # the total counted too
    assert run("SUM", ALL - {"sections"}, column="Units") == 1200.0          # stops at the blank row, and
    assert run("SUM", ALL - {"sections", "skip_total"}, column="Units") == 1500.0    # skip_total drops PEAR
    assert run("SUM", ALL - {"header=2"}, column="Units") is None            # the title read as the header
    assert run("AVG", column="Share") == 0.2
    assert run("AVG", ALL - {"pct"}, column="Share") is None                 # no percent parses
    assert run("COUNTIF", where=(("Date", "month", 3),)) == 2                # 05/03 is 5 March
    assert run("COUNTIF", ALL - {"date=dmy"}, where=(("Date", "month", 3),)) == 1   # ... read as 3 May
    assert run("COUNTIF", where=(("Region", "=", "north"),)) == 2
    assert run("COUNTIF", ALL - {"norm_key"}, where=(("Region", "=", "north"),)) == 1
    assert run("LOOKUP", column="Units", key="apple") == 1200.0
    assert run("LOOKUP", ALL - {"norm_key"}, column="Units", key="apple") is None
    assert run("LOOKUP", column="Date", key="pear") == "2023-03-09"
    assert run("FILL", column="Units", column2="Share") == (120.0, 60.0, 600.0)
    assert run("SORT", column="Units") == ("plum", "apple", "pear")
    assert run("SORT", column="Date") == ("plum", "pear", "apple")
    assert run("SUM", column="Units", where=(("Units", ">", 1000.0), ("Region", "=", "north"))) == 3200.0
    # cell programs return where the answer lands: answer_position with the flag, else the first free column
    assert run("COUNTIF", ALL | {"answer_position"}, where=(("Region", "=", "north"),), answer_position="H4") == \
        ("H4", 2)
    assert run("COUNTIF", where=(("Region", "=", "north"),), answer_position="H4") == ("F2", 2)
    # harmful flags on a sheet without their quirk drop a real row
    plain = ts.Sheet("P/1", HAND.rows[1:4])
    assert ts.execute(plain, ts.Program("COUNTIF", where=(("Region", "=", "south"),))) == 1
    assert ts.execute(plain, ts.Program("COUNTIF", where=(("Region", "=", "south"),),
                                        flags=frozenset({"skip_total"}))) == 0
    assert ts.execute(plain, ts.Program("SUM", column="Share", flags=frozenset({"header=2", "pct"}))) is None


def test_rule_lines_round_trip():
    for q in ts.QUIRKS:
        cues = ts.CUES[q]
        for variant in range(5):
            line = rules.rule_line(q, "precise", variant)
            assert rules.parse_rule_line(line) == (q, "precise", ())
            for k in range(1, len(cues) + 1):
                conds = cues[:k][::-1]
                assert rules.parse_rule_line(rules.rule_line(q, "precise", variant, conditions=conds)) == \
                    (q, "precise", tuple(c for c in ts.FEATURES if c in conds))
            assert rules.parse_rule_line(rules.rule_line(q, "over", variant)) == (q, "over", ())
        assert rules.parse_rule_line(rules.rule_line(q, "vague")) == (q, "vague", ())
        assert rules.parse_rule_line(rules.rule_line(q, "negative")) == (q, "negative", ())
        assert rules.parse_rule_line(rules.rule_line(q, "negative", sheet_id="EC0042")) == (q, "negative", ("EC0042",))
        assert rules.parse_rule_line(rules.rule_line(q, "local", sheet_id="EC0042")) == (q, "local", ("EC0042",))
        assert len(rules.PRECISE[q]) >= 3 and rules.QUIRK_TITLE[q]
    lines = {rules.rule_line(q, k, v, sheet_id="X1") for q in ts.QUIRKS for k in ("precise", "over") for v in range(4)}
    assert len(lines) == sum(len(rules.PRECISE[q]) + len(rules.OVER[q]) for q in ts.QUIRKS)   # all distinct
    for i in range(len(rules.FILLER)):
        assert rules.parse_rule_line(rules.rule_line("", "filler", i)) is None
    text = skill(rules.rule_line("title_row", "precise", 1), rules.rule_line("", "filler", 2),
                 rules.rule_line("title_row", "negative"), rules.rule_line("percent", "local", sheet_id="TC0001"))
    assert rules.read_rules(text) == {"title_row": [("precise", ()), ("negative", ())],
                                      "percent": [("local", ("TC0001",))]}


def test_truncation_hides_rules_past_the_budget():
    lines = [rules.rule_line(q, "precise") for q in ts.QUIRKS]
    text = skill(*lines)
    body = rules.skill_body(text)
    assert "name:" not in body and rules.count_tokens("a b  c\nd") == 4
    seen = rules.read_rules(text, budget_tokens=rules.count_tokens(body))
    assert list(seen) == list(ts.QUIRKS)
    budget = rules.count_tokens("\n".join(body.split("\n")[:6]))      # '# TinySheet', '', '## Rules', 3 rules
    assert list(rules.read_rules(text, budget)) == list(ts.QUIRKS[:3])
    assert list(rules.read_rules(text, budget - 1)) == list(ts.QUIRKS[:2])       # whole lines only
    assert rules.truncate("one two\nthree four five\nsix", 4) == "one two"


def test_seed_skills():
    assert rules.seed_skill("none") == ""
    for mode in ("creation", "deepening"):
        text = rules.seed_skill(mode, np.random.default_rng(1))
        assert text.startswith("---\nname: tinysheet\ndescription: ") and "## General" in text
        assert text == rules.seed_skill(mode, np.random.default_rng(1))
    assert rules.read_rules(rules.seed_skill("creation")) == {}
    deep = rules.read_rules(rules.seed_skill("deepening", np.random.default_rng(2)))
    assert deep == {q: [("precise", ())] for q in ("thousands", "title_row", "totals_row", "percent")}
    for q in deep:
        assert f"## {rules.QUIRK_TITLE[q]}" in rules.seed_skill("deepening")
    assert rules.read_rules(rules.full_skill()) == {q: [("precise", ())] for q in ts.QUIRKS}


def find(family, pred):
    return next(t for t in tasks(family) if pred(t))


def test_agent_reads_each_rule_kind():
    rng = np.random.default_rng(0)
    z = zero_profile()
    t = find("cell", lambda t: t.quirks == {"title_row"} and not any(t.features[c] for c in ts.CUES["totals_row"]))
    assert not agent.run_agent(z, "", t, rng).success                    # no rule, no prior: header=2 missing
    precise = agent.run_agent(z, skill(rules.rule_line("title_row", "precise", 2)), t, rng)
    assert precise.flags == {"header=2"} and precise.success and "RUN " in precise.log and "SUBMIT" in precise.log
    other = agent.run_agent(z, skill(rules.rule_line("title_row", "local", sheet_id="EC9999")), t, rng)
    assert other.flags == frozenset() and not other.success             # another sheet's local rule: no rule
    own = agent.run_agent(z, skill(rules.rule_line("title_row", "local", sheet_id=t.task_id)), t, rng)
    assert own.flags == {"header=2"}
    # a conditional rule fires only on its own cues
    cue = next(c for c in ts.CUES["title_row"] if t.features[c])
    twin = next(c for c in ts.CUES["title_row"] if c != cue)
    assert agent.run_agent(z, skill(rules.rule_line("title_row", "precise", conditions=(cue,))), t, rng).success
    assert not agent.run_agent(z, skill(rules.rule_line("title_row", "precise", conditions=(twin,))), t, rng).success
    # over-general: used on a sheet without the quirk; harmful there, harmless for a no-op flag
    u = find("cell", lambda t: not t.quirks)
    over = agent.run_agent(z, skill(rules.rule_line("totals_row", "over")), u, rng)
    assert over.flags == {"skip_total"} and not over.success
    assert agent.run_agent(z, skill(rules.rule_line("thousands", "over", 1)), u, rng).success
    # a negative rule alone forbids the flag; against a firing rule it is a coin flip
    neg = rules.rule_line("title_row", "negative")
    assert agent.run_agent(agent.PROFILES["L"], skill(neg), t, rng).flags == frozenset()
    both = skill(rules.rule_line("title_row", "precise"), neg)
    rate = np.mean([agent.run_agent(z, both, t, rng).success for _ in range(400)])
    assert 0.4 < rate < 0.6
    # vague: p_vague when the cue shows
    vague = skill(rules.rule_line("title_row", "vague"))
    assert 0.6 < np.mean([agent.run_agent(zero_profile(p_vague=0.7), vague, t, rng).success
                          for _ in range(400)]) < 0.8
    # past the budget a rule is not seen
    long = skill(*[rules.rule_line("", "filler", i) for i in range(12)], rules.rule_line("title_row", "precise"))
    short = dataclasses.replace(z, budget_tokens=40)
    assert not agent.run_agent(short, long, t, rng).success and agent.run_agent(z, long, t, rng).success


def test_skills_move_success_and_profiles_differ():
    cell = tasks("cell")
    rate = {(p, s): agent.evaluate(agent.PROFILES[p], text, cell, np.random.default_rng(5))
            for p in ("S", "L") for s, text in (("none", ""), ("deep", rules.seed_skill("deepening")),
                                                 ("full", rules.full_skill()))}
    for p in ("S", "L"):
        assert rate[(p, "none")] + 0.1 < rate[(p, "deep")] < rate[(p, "full")] - 0.1
    by = {p: agent.evaluate_by_quirk(agent.PROFILES[p], "", cell, np.random.default_rng(5)) for p in ("S", "L")}
    assert by["S"]["thousands"] > by["L"]["thousands"] and by["L"]["sections"] > by["S"]["sections"]


def failures(n=200):
    pool = tasks("cell") + tasks("tableqa")
    rng = np.random.default_rng(3)
    out = []
    for t in pool:
        traj = agent.run_agent(agent.PROFILES["S"], rules.seed_skill("deepening"), t, rng)
        if not traj.success:
            out.append((traj, t))
        if len(out) == n:
            return out
    return out


def test_agentic_analyst_finds_the_cause_and_beats_the_single_call():
    fails = failures()
    assert len(fails) == 200
    by_id = {t.task_id: t for _, t in fails}
    rng = np.random.default_rng(4)
    agentic, single, found = [], [], 0
    for traj, t in fails:
        lessons, calls = analysts.agentic_error_analyst(traj, t, rng, max_calls=20)
        assert 1 <= calls <= 20
        if lessons:
            found += 1
            assert {(x.quirk, x.polarity) for x in lessons} == set(analysts.true_changes(traj, t))
            assert all(x.source == "error" and x.text.startswith("- ") for x in lessons)
            assert all(rules.parse_rule_line(x.text)[0] == x.quirk for x in lessons)
        agentic += lessons
        single += analysts.single_call_error_analyst(traj, t, rng)
    assert found >= 0.85 * len(fails)
    p_agentic, p_single = analysts.lesson_precision(agentic, by_id), analysts.lesson_precision(single, by_id)
    assert p_agentic == 1.0 and 0.55 < p_single < 0.75, (p_agentic, p_single)
    wordings = collections.Counter(x.wording for x in agentic)
    assert 0.2 < wordings["local"] / len(agentic) < 0.4 and 0.1 < wordings["over"] / len(agentic) < 0.3
    # one budget call short of the first passing flip: no lesson
    traj, t = fails[0]
    _, needed = analysts.agentic_error_analyst(traj, t, np.random.default_rng(0))
    assert analysts.agentic_error_analyst(traj, t, np.random.default_rng(0), max_calls=needed - 1) == ([], needed - 1)


def test_success_analyst():
    rng = np.random.default_rng(6)
    t = find("cell", lambda t: len(t.quirks) == 2)
    traj = agent.run_agent(zero_profile(), rules.full_skill(), t, rng)
    traj = dataclasses.replace(traj, flags=ts.gold_flags(t) | {"parse=num"}, success=True)   # + a no-op flag
    assert ts.check(t, traj.flags)
    lessons = analysts.success_analyst(traj, t, rng)
    assert {x.quirk for x in lessons} == set(t.quirks) and all(x.polarity == 1 for x in lessons)
    assert analysts.lesson_precision(lessons, {t.task_id: t}) == 1.0
    assert analysts.agentic_error_analyst(traj, t, rng) == ([], 0)


def test_determinism_and_disjoint_splits():
    a = ts.make_tasks(30, "cell", 7, "evolve")
    b = list(ts._make_tasks.__wrapped__(30, "cell", 7, "evolve"))          # regenerated, not the cached copy
    assert a == b and a[:10] == ts.make_tasks(10, "cell", 7, "evolve")
    test = ts.make_tasks(30, "cell", 7, "test")
    assert not {t.task_id for t in a} & {t.task_id for t in test}
    assert not {v.rows for t in a for v in t.variants} & {v.rows for t in test for v in t.variants}
    deep = rules.seed_skill("deepening")
    run1 = [agent.run_agent(agent.PROFILES["L"], deep, t, np.random.default_rng(9)) for t in a]
    run2 = [agent.run_agent(agent.PROFILES["L"], deep, t, np.random.default_rng(9)) for t in a]
    assert run1 == run2
    traj = next(x for x in run1 if not x.success)
    task = next(t for t in a if t.task_id == traj.task_id)
    assert analysts.agentic_error_analyst(traj, task, np.random.default_rng(1)) == \
        analysts.agentic_error_analyst(traj, task, np.random.default_rng(1))
    assert analysts.single_call_error_analyst(traj, task, np.random.default_rng(1)) == \
        analysts.single_call_error_analyst(traj, task, np.random.default_rng(1))


def test_tasks_trajectories_and_lessons_do_not_depend_on_the_hash_seed():
    # iterating a set of strings draws random numbers in an order set by PYTHONHASHSEED: two processes with
    # different hash seeds must still build the same tasks, trajectories and lessons
    import os
    import subprocess
    import sys

    script = (
        "import hashlib, numpy as np\n"
        "from projects.trace2skill import rules\n"
        "from projects.trace2skill.agent import PROFILES, run_agent\n"
        "from projects.trace2skill.analysts import agentic_error_analyst, single_call_error_analyst, success_analyst\n"
        "from projects.trace2skill.tinysheet import make_tasks, task_text\n"
        "tasks = make_tasks(40, 'cell', 101, 'evolve') + make_tasks(20, 'tableqa', 303, 'test')\n"
        "rng = np.random.default_rng(0)\n"
        "s0 = rules.seed_skill('deepening', np.random.default_rng(0))\n"
        "trajs = [run_agent(PROFILES['S'], s0, t, rng) for t in tasks]\n"
        "out = [task_text(t) for t in tasks] + [(x.task_id, sorted(x.flags), x.success, x.log) for x in trajs]\n"
        "for x, t in zip(trajs, tasks):\n"
        "    out += [agentic_error_analyst(x, t, rng), single_call_error_analyst(x, t, rng), success_analyst(x, t, rng)]\n"
        "print(hashlib.sha1(repr(out).encode()).hexdigest())\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    digests = [subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root}).stdout
               for seed in ("1", "2")]
    assert digests[0] == digests[1] and digests[0].strip()
