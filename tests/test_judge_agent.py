"""Skill packages, the resource router, label contracts and the tool-calling judge agent (shared/judges/skills.py,
agent.py, verdict.py's label contracts) with scripted backends."""
import json
import os

import pytest

from shared.judges.agent import (AgentLimits, AgentReply, ChatBackend, JudgeAgent, JudgeAgentEnvironment, JudgeCase,
                                 ScriptedBackend, TextPolicyBackend, ToolCall, parse_tool_calls)
from shared.judges.skills import ResourceRefused, ResourceRouter, SkillError, load_skill, parse_front_matter
from shared.judges.verdict import JudgeError, canonical_label, label_pref, label_strength, parse_label
from shared.rewards.sandbox import namespace_problem

needs_sandbox = pytest.mark.skipif(namespace_problem() is not None, reason=str(namespace_problem()))

RESOURCES = [
    {"id": "rubric", "type": "rubric", "path": "rubric.md", "applies_to": ["*"],
     "allowed_setting": ["fair", "operational"], "leakage_level": "visible", "cost": 1},
    {"id": "answer_key", "type": "reference", "path": "key.md", "applies_to": ["math"],
     "allowed_setting": ["operational"], "leakage_level": "reference", "cost": 2},
    {"id": "labels", "type": "metadata", "path": "gold.md", "applies_to": ["*"],
     "allowed_setting": ["fair", "operational"], "leakage_level": "gold", "cost": 0},
    {"id": "exact_match", "type": "verifier", "path": "verify.py", "applies_to": ["math"],
     "allowed_setting": ["operational"], "leakage_level": "reference", "cost": 3},
]


@pytest.fixture
def skill_dir(tmp_path):
    (tmp_path / "SKILL.md").write_text("---\nname: reward_judge\ndescription: judge pairs\nmax_steps: 5\n"
                                       "settings: [fair, operational]\n---\nDiagnose, select, verify, aggregate.\n")
    (tmp_path / "rubric.md").write_text("correctness > constraints > safety > style")
    (tmp_path / "key.md").write_text("The answer is 42.")
    (tmp_path / "gold.md").write_text("A is chosen")
    (tmp_path / "verify.py").write_text(
        "def check(prompt, candidates):\n    return [c.strip().endswith('42') for c in candidates]\n")
    (tmp_path / "resources.json").write_text(json.dumps(RESOURCES))
    return str(tmp_path)


def test_load_skill_reads_front_matter_and_resources(skill_dir):
    skill = load_skill(skill_dir)
    assert skill.name == "reward_judge" and skill.meta["max_steps"] == 5
    assert skill.meta["settings"] == ["fair", "operational"]
    assert skill.body == "Diagnose, select, verify, aggregate."
    assert set(skill.resources) == {"rubric", "answer_key", "labels", "exact_match"}
    assert skill.resources["answer_key"].text == "The answer is 42." and skill.resources["exact_match"].cost == 3.0


@pytest.mark.parametrize("change, message", [
    (lambda r: r[0].update(type="vibes"), "resource 'rubric': type 'vibes'"),
    (lambda r: r[0].update(leakage_level="secret"), "leakage_level 'secret'"),
    (lambda r: r[0].update(cost=-1), "cost must be a number >= 0"),
    (lambda r: r[0].pop("allowed_setting"), "no allowed_setting"),
    (lambda r: r[0].update(path="../outside.md"), "leaves the package"),
    (lambda r: r[0].update(colour="red"), "unknown key 'colour'"),
    (lambda r: r.append(dict(r[0])), "appears twice"),
])
def test_bad_resource_index_is_one_line_naming_it(skill_dir, change, message):
    resources = json.loads(json.dumps(RESOURCES))
    change(resources)
    with open(os.path.join(skill_dir, "resources.json"), "w") as f:
        json.dump(resources, f)
    with pytest.raises(SkillError, match=message) as e:
        load_skill(skill_dir)
    assert "resources.json" in str(e.value) and "\n" not in str(e.value)


def test_front_matter_errors():
    with pytest.raises(SkillError, match="no front matter"):
        parse_front_matter("name: x\n")
    with pytest.raises(SkillError, match="line 3: expected 'key: value'"):
        parse_front_matter("---\nname: x\njust words\n---\n")


def test_router_refuses_what_the_setting_forbids(skill_dir):
    skill = load_skill(skill_dir)
    fair = ResourceRouter(skill, "fair", family="math")
    assert fair.view("rubric").startswith("correctness")
    with pytest.raises(ResourceRefused, match="not allowed in setting 'fair'"):
        fair.view("answer_key")
    with pytest.raises(ResourceRefused, match="leakage level 'gold'"):   # gold never, whatever allowed_setting says
        fair.view("labels")
    operational = ResourceRouter(skill, "operational", family="math", max_views=2)
    assert operational.view("answer_key") == "The answer is 42."
    with pytest.raises(ResourceRefused, match="leakage level 'gold'"):
        operational.view("labels")
    assert [r.id for r in operational.available()] == ["rubric", "answer_key", "exact_match"]
    assert [r.id for r in ResourceRouter(skill, "operational", family="chat").available()] == ["rubric"]
    with pytest.raises(ResourceRefused, match="does not apply to 'chat'"):
        ResourceRouter(skill, "operational", family="chat").view("answer_key")
    operational.view("rubric")
    with pytest.raises(ResourceRefused, match="view budget spent"):
        operational.view("rubric")
    assert operational.cost == 3.0 and operational.used == ["answer_key", "rubric"]
    with pytest.raises(ResourceRefused, match="run budget spent"):   # max_runs defaults to 0 (fair)
        operational.run("exact_match", "q", ["42", "41"])
    with pytest.raises(ResourceRefused, match="unknown resource"):
        operational.view("nope")


def test_router_mounts_sample_resources_under_the_same_rules(skill_dir):
    router = ResourceRouter(load_skill(skill_dir), "fair")
    router.mount([{"id": "ref", "type": "reference", "text": "7", "allowed_setting": ["fair"],
                   "leakage_level": "reference"}])
    with pytest.raises(ResourceRefused, match="above what setting 'fair' allows"):
        router.view("ref")


@needs_sandbox
def test_router_runs_a_verifier_in_the_sandbox(skill_dir):
    router = ResourceRouter(load_skill(skill_dir), "operational", family="math", max_runs=1)
    assert router.run("exact_match", "q", ["so 42", "so 41"]).value == [True, False]
    with pytest.raises(ResourceRefused, match="is a rubric, not a verifier"):
        router.run("rubric", "q", [])


# ------------------------------------------------------------------------------------------ label contracts

@pytest.mark.parametrize("text, contract, label", [
    ('{"verdict": "B", "confidence": 0.8, "reason": "A is wrong"}', "pairwise", "B"),
    ('reasoning... {"verdict": "tie"}', "pairwise", "Tie"),
    ("Verdict: Output (b)", "forced_choice", "Output (b)"),
    ('{"verdict": "output A"}', "forced_choice", "Output (a)"),
    ("I think A>>B is right. [[A>>B]]", "scaled", "A>>B"),
    ("<answer>C</answer>", "listwise", "C"),
    ("**Final answer: D**", "listwise", "D"),
    # malformed: no label of the contract
    ("The answer is probably E", "listwise", None),
    ("", "pairwise", None),
    ('{"verdict": "Z"}', "pairwise", None),
    ("A", "scaled", None),                       # the scaled contract has no bare "A"
    ('{"verdict": "A", ', "pairwise", None),     # cut off inside the JSON
    ("Response A: good. Response B: bad.", "pairwise", None),
    ("[[C]]", "pairwise", None),
    (None, "pairwise", None),
])
def test_parse_label(text, contract, label):
    assert parse_label(text, contract) == label


def test_label_prefs():
    assert [label_pref(x, "scaled") for x in ("A>>B", "A>B", "A=B", "B>A", "B>>A")] == [1, 1, 0, -1, -1]
    assert [label_strength(x) for x in ("A>>B", "A>B", "A=B", "B>>A")] == [2, 1, 0, 2]
    assert label_pref("Output (b)", "forced_choice") == -1 and label_pref("C", "listwise") is None
    assert canonical_label(True, "pairwise") is None
    with pytest.raises(ValueError, match="label contract 'nope'"):
        parse_label("A", "nope")


# ------------------------------------------------------------------------------------------ the agent loop

def call(name, **arguments):
    return AgentReply(tool_calls=(ToolCall(name, arguments),))


CASE = JudgeCase("What is 6*7?", ["6*7 = 42", "6*7 = 41"], family="math",
                 resources=[{"id": "ref", "type": "reference", "text": "42", "allowed_setting": ["operational"],
                             "leakage_level": "reference", "cost": 1}])


def test_agent_loads_skill_views_and_answers(skill_dir):
    backend = ScriptedBackend([call("use_skill"), call("view_resource", id="ref"),
                               call("final_answer", verdict="A", reason="matches the key")])
    agent = JudgeAgent(backend, skill=load_skill(skill_dir), setting="operational")
    result = agent.judge(CASE)
    assert (result.label, result.pref, result.valid, result.finalised) == ("A", 1, True, "tool")
    assert (result.steps, result.calls, result.resource_views, result.resource_cost) == (3, 3, 1, 1.0)
    assert result.used_resources == ("ref",) and result.reason == "matches the key"
    assert backend.calls[0][0] == ["use_skill", "final_answer"]          # before the skill: two tools
    assert backend.calls[1][0] == ["use_skill", "final_answer", "list_resources", "view_resource", "python_sandbox"]
    assert json.loads(backend.calls[2][2][-1]["content"]) == {"id": "ref", "text": "42"}


def test_agent_refusals_and_bad_verdicts_are_tool_errors(skill_dir):
    backend = ScriptedBackend([call("view_resource", id="ref"),        # not offered before use_skill
                               call("use_skill"), call("view_resource", id="ref"),   # refused in fair
                               call("final_answer", verdict="maybe"), "Verdict: B"])
    result = JudgeAgent(backend, skill=load_skill(skill_dir), setting="fair").judge(CASE)
    errors = [t["result"].get("error", "") for t in result.trace if "result" in t]
    assert "not available now" in errors[0] and "not allowed in setting 'fair'" in errors[2]
    assert "'maybe' is not one of A, B, Tie" in errors[3]
    assert (result.label, result.finalised, result.steps, result.resource_views) == ("B", "text", 5, 0)


def test_agent_step_budget_then_forced_finalisation(skill_dir):
    limits = AgentLimits(max_steps=2, final_max_tokens=7)
    backend = ScriptedBackend([call("use_skill"), call("list_resources"), '{"verdict": "Tie", "reason": "same"}'])
    result = JudgeAgent(backend, skill=load_skill(skill_dir), limits=limits).judge(CASE)
    assert (result.label, result.finalised, result.steps, result.calls) == ("Tie", "forced", 2, 3)
    tools, max_tokens, messages = backend.calls[2]
    assert tools == [] and max_tokens == 7 and "Stop using tools" in messages[-1]["content"]
    assert [m.get("tool_calls", [{}])[0].get("function", {}).get("name") for m in messages
            if m["role"] == "assistant"] == ["use_skill", "list_resources"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    # a final_answer tool call during forced finalisation is still a verdict (tools shown or not)
    backend = ScriptedBackend(["hmm", call("final_answer", verdict="B")])
    result = JudgeAgent(backend, limits=AgentLimits(max_steps=1)).judge(CASE)
    assert (result.label, result.finalised) == ("B", "forced")


def test_agent_retry_emergency_and_fallback(skill_dir):
    limits = AgentLimits(max_steps=1, emergency_max_tokens=9)
    backend = ScriptedBackend(["thinking", "still thinking", "no idea", "[[A]]"])
    result = JudgeAgent(backend, limits=limits).judge(CASE)
    assert (result.label, result.finalised, result.calls) == ("A", "emergency", 4)
    tools, max_tokens, messages = backend.calls[3]
    assert max_tokens == 9 and len(messages) == 2 and "without tools" in messages[0]["content"]
    assert "tool_calls" not in backend.calls[2][2][-2]    # a text-only reply carries no empty tool_calls list
    backend = ScriptedBackend(["?", "?", "?", "?"])
    result = JudgeAgent(backend, limits=limits).judge(CASE)
    assert (result.label, result.valid, result.finalised) == ("Tie", False, "fallback")
    listwise = JudgeCase("q", ["a", "b", "c", "d"], contract="listwise")
    result = JudgeAgent(ScriptedBackend([]), limits=limits).judge(listwise)
    assert (result.label, result.valid) == (None, False)
    # every backend call failing skips through the stages to the fallback, never raises
    backend = ScriptedBackend([JudgeError("down")] * 4)
    result = JudgeAgent(backend, limits=limits).judge(CASE)
    assert result.finalised == "fallback" and sum("error" in t for t in result.trace) == 4


@needs_sandbox
def test_agent_sandbox_budget_and_caps(skill_dir):
    code = "print(sum(c.endswith('42') for c in candidates), len(prompt))"
    limits = AgentLimits(max_steps=6, max_sandbox_calls=2, max_code_chars=100)
    backend = ScriptedBackend([call("use_skill"), call("python_sandbox", code=code),
                               call("python_sandbox", code="x" * 101), call("python_sandbox", code=code),
                               call("python_sandbox", code=code), call("final_answer", verdict="A")])
    result = JudgeAgent(backend, skill=load_skill(skill_dir), limits=limits).judge(CASE)
    outputs = [t["result"] for t in result.trace if t.get("tool") == "python_sandbox"]
    assert outputs[0]["status"] == "ok" and outputs[0]["stdout"].strip() == "1 12"
    assert "over the limit of 100" in outputs[1]["error"]
    assert outputs[2]["status"] == "ok" and "sandbox budget spent (2 runs" in outputs[3]["error"]
    assert result.sandbox_calls == 2 and result.label == "A"


class FakeClient:
    def __init__(self, replies, url="http://x"):
        self.replies, self.url, self.requests = list(replies), url, []

    def chat(self, messages, **params):
        self.requests.append(params)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def test_chat_backend_reads_tool_calls_and_fails_over():
    tool_reply = {"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "final_answer", "arguments": '{"verdict": "B"}'}}]}}]}
    down, up = FakeClient([JudgeError("503")]), FakeClient([tool_reply])
    backend = ChatBackend([down, up])
    result = JudgeAgent(backend).judge(CASE)
    assert (result.label, result.finalised, backend.failovers) == ("B", "tool", 1)
    assert up.requests[0]["tool_choice"] == "required" and up.requests[0]["temperature"] == 0.0
    assert [t["function"]["name"] for t in up.requests[0]["tools"]] == ["final_answer"]


def test_text_policy_backend_and_environment(skill_dir):
    texts = iter(['<tool_call>{"name": "use_skill", "arguments": {}}</tool_call>',
                  '<tool_call>{"name": "final_answer", "arguments": {"verdict": "A"}}</tool_call>'])
    seen = []
    backend = TextPolicyBackend(lambda prompt, n: seen.append(prompt) or next(texts))
    result = JudgeAgent(backend, skill=load_skill(skill_dir)).judge(CASE)
    assert result.label == "A" and '"name": "use_skill"' in seen[0] and "<user>" in seen[0]
    assert parse_tool_calls('<tool_call>{"name": 3}</tool_call><tool_call>{bad</tool_call>') == ()
    # the same session as a shared.agent Environment: forced finalisation after max_steps turns
    env = JudgeAgentEnvironment(JudgeAgent(None, skill=load_skill(skill_dir), limits=AgentLimits(max_steps=2)))
    assert "[Response A]" in env.reset(CASE)
    assert "<tool_result>" in env.step('<tool_call>{"name": "use_skill", "arguments": {}}</tool_call>')
    assert "Stop using tools" in env.step("let me think")
    done = env.step('{"verdict": "B"}')
    assert done.observation is None and done.reward == 1.0
    assert (env.result().label, env.result().finalised) == ("B", "forced")
