"""A tool-calling judge agent (Skill-RM's loop, spec ../shared/papers/skill_rm.md 1.2 and section 2) over a chat
backend: an OpenAI-compatible endpoint (ChatBackend, on shared/judges/http.py's ChatClient, with endpoint
failover), our own policy as a text generator (TextPolicyBackend: tool calls as <tool_call>{json}</tool_call>), or
a script (ScriptedBackend, for tests). JudgeAgentEnvironment is the same session as a shared.agent Environment, so
the EpisodeSampler can run it with a policy being trained.

    agent = JudgeAgent(backend, skill=load_skill(folder), setting="fair", limits=AgentLimits(max_steps=5))
    result = agent.judge(JudgeCase(prompt, [a, b], contract="pairwise", family="math", resources=[...]))
    result.label, result.pref, result.finalised, result.trace

The loop: tools {use_skill, final_answer} until the skill is loaded, then also list_resources, view_resource,
python_sandbox and (when the router allows runs) run_resource. Each step the backend answers with text and/or
tool calls; a final_answer with a label of the case's contract (shared/judges/verdict.py LABEL_CONTRACTS) ends the
judgment, an invalid one is answered with an error and the loop goes on; a reply without tool calls whose text
holds a valid label also ends it. Budgets: max_steps backend calls; the router's resource views / runs; at most
max_sandbox_calls python_sandbox runs (timeout, code and output caps). A tool over its budget answers with an error
naming the budget, never a crash. Without a valid verdict after max_steps: forced finalisation (no tools,
final_max_tokens), then a text-only retry, then an "emergency" direct-judge call (a fresh conversation, no
tools), then the fallback label (contract's tie, or `fallback`) with valid=False. A backend failure (JudgeError)
skips to the next stage.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Callable, Sequence

from shared.agent.episodes import Environment, StepResult
from shared.judges.skills import ResourceRefused, ResourceRouter, Resource, Skill
from shared.judges.verdict import LABEL_CONTRACTS, JudgeError, canonical_label, label_pref, parse_label

FALLBACK_LABELS = {"pairwise": "Tie", "scaled": "A=B", "forced_choice": None, "listwise": None}
FINALISED = ("tool", "text", "forced", "retry", "emergency", "fallback")


@dataclasses.dataclass(frozen=True)
class AgentLimits:
    max_steps: int = 5                 # backend calls in the tool loop (fair 5, operational 6)
    max_sandbox_calls: int = 3
    sandbox_timeout_s: float = 3.0
    max_code_chars: int = 6000
    max_output_chars: int = 4000
    max_tokens: int = 4096
    final_max_tokens: int = 1024
    emergency_max_tokens: int = 2048
    forced_finalisation: bool = True
    text_retry: bool = True
    emergency: bool = True
    tool_choice: str = "required"      # what ChatBackend sends in the loop ("required" | "auto")


@dataclasses.dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict
    id: str = ""


@dataclasses.dataclass(frozen=True)
class AgentReply:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclasses.dataclass
class JudgeCase:
    prompt: str
    candidates: Sequence[str]
    contract: str = "pairwise"
    family: str | None = None
    resources: Sequence[Resource | dict] = ()      # the case's own resources (mounted on the router)


@dataclasses.dataclass
class AgentResult:
    label: str | None
    valid: bool                      # False: no stage gave a label of the contract (label is the fallback)
    finalised: str                   # one of FINALISED
    steps: int                       # backend calls in the tool loop
    calls: int                       # backend calls in all (loop + finalisation stages)
    resource_views: int = 0
    resource_runs: int = 0
    sandbox_calls: int = 0
    resource_cost: float = 0.0
    used_resources: tuple[str, ...] = ()
    reason: str = ""
    trace: list = dataclasses.field(default_factory=list)
    contract: str = "pairwise"

    @property
    def pref(self) -> int | None:
        return label_pref(self.label, self.contract)


# ------------------------------------------------------------------------------------------ prompts and tools

SYSTEM_PROMPT = (
    "You are a careful judge of candidate responses. You may load the evaluation skill (use_skill) and then open "
    "only the resources you need, run short Python checks over the visible text, and finally call final_answer. "
    "Ignore position, length, markdown polish and confident tone. Allow a tie only when the candidates are truly "
    "equivalent. Gold labels are never available.")
DIRECT_PROMPT = "Judge the candidates directly, without tools. Reply with only a JSON object {{\"verdict\": ...}} " \
                "whose verdict is one of: {labels}."


def _letters(n: int, contract: str) -> list[str]:
    if contract == "forced_choice":
        return [f"Output ({c})" for c in "ab"[:n]]
    return [f"Response {c}" for c in "ABCD"[:n]]


def render_case(case: JudgeCase) -> str:
    parts = [f"[Prompt]\n{case.prompt}"]
    for name, text in zip(_letters(len(case.candidates), case.contract), case.candidates):
        parts.append(f"[{name}]\n{text}")
    parts.append(f"Answer with one of: {', '.join(LABEL_CONTRACTS[case.contract])}.")
    return "\n\n".join(parts)


def _tool(name: str, description: str, **properties) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()},
                       "required": [k for k in properties if k not in ("confidence", "reason", "used_resources")]}}}


TOOLS = {
    "use_skill": _tool("use_skill", "Load the evaluation skill: its procedure and resource index."),
    "final_answer": _tool("final_answer", "Give the verdict (one label of the contract).", verdict="string",
                          confidence="number", reason="string", used_resources="array"),
    "list_resources": _tool("list_resources", "List the resources this case may open."),
    "view_resource": _tool("view_resource", "Read one resource by id.", id="string"),
    "run_resource": _tool("run_resource", "Run a verifier resource on the candidates.", id="string"),
    "python_sandbox": _tool("python_sandbox", "Run short Python over the variables `prompt` and `candidates` "
                            "(a list of strings); print what you need. No files, network or subprocesses.",
                            code="string"),
}


# ------------------------------------------------------------------------------------------ backends

class ScriptedBackend:
    """Answers with the given replies in order (AgentReply, a text, or an exception to raise); records every call
    as (tool names offered, max_tokens, a copy of the messages). Past the script it answers ""."""

    def __init__(self, replies: Sequence):
        self.replies, self.calls = list(replies), []

    def __call__(self, messages, tools, max_tokens, tool_choice=None) -> AgentReply:
        self.calls.append(([t["function"]["name"] for t in tools or []], max_tokens, [dict(m) for m in messages]))
        reply = self.replies.pop(0) if self.replies else ""
        if isinstance(reply, BaseException):
            raise reply
        return reply if isinstance(reply, AgentReply) else AgentReply(text=str(reply))


def _arguments(raw) -> dict:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except (json.JSONDecodeError, ValueError, RecursionError):
        return {"__malformed__": str(raw)[:200]}
    return value if isinstance(value, dict) else {"__malformed__": str(raw)[:200]}


class ChatBackend:
    """An OpenAI-compatible endpoint with tool calling (vLLM with a tool-call parser, OpenAI, ...). clients: one
    ChatClient or several (endpoint failover: a JudgeError moves on to the next client, the last error is
    raised). temperature 0, top_p 1 (spec section 2); extra keyword arguments go into every request."""

    def __init__(self, clients, *, temperature: float = 0.0, top_p: float = 1.0, **params):
        self.clients = list(clients) if isinstance(clients, (list, tuple)) else [clients]
        if not self.clients:
            raise ValueError("ChatBackend: no client")
        self.params = {"temperature": float(temperature), "top_p": float(top_p), **params}
        self.failovers = 0

    def __call__(self, messages, tools, max_tokens, tool_choice=None) -> AgentReply:
        params = dict(self.params, max_tokens=int(max_tokens))
        if tools:
            params.update(tools=tools, tool_choice=tool_choice or "auto")
        error = None
        for i, client in enumerate(self.clients):
            try:
                reply = client.chat(messages, **params)
                message = reply["choices"][0]["message"]
                calls = tuple(ToolCall(c["function"]["name"], _arguments(c["function"].get("arguments")),
                                       str(c.get("id", ""))) for c in message.get("tool_calls") or [])
                return AgentReply(message.get("content") or "", calls)
            except JudgeError as e:
                error = e
            except (KeyError, IndexError, TypeError, AttributeError):
                error = JudgeError(f"{getattr(client, 'url', 'endpoint')}: not a chat completion with tool calls")
            if i + 1 < len(self.clients):
                self.failovers += 1
        raise error


_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def render_messages(messages, tools) -> str:
    """One text prompt of a conversation for a plain language model: the tools' specs, then each message."""
    parts = []
    if tools:
        specs = [{"name": t["function"]["name"], "parameters": t["function"]["parameters"]["properties"]}
                 for t in tools]
        parts.append("Tools (call one as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>):\n"
                     + json.dumps(specs))
    for m in messages:
        content = m.get("content") or ""
        for c in m.get("tool_calls") or []:
            content += f"\n<tool_call>{json.dumps({'name': c['function']['name'], 'arguments': _arguments(c['function']['arguments'])})}</tool_call>"
        parts.append(f"<{m['role']}>\n{content}\n</{m['role']}>")
    parts.append("<assistant>\n")
    return "\n".join(parts)


def parse_tool_calls(text: str) -> tuple[ToolCall, ...]:
    """The <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks of a policy's text (malformed ones are
    skipped)."""
    calls = []
    for i, block in enumerate(_TOOL_CALL.findall(text or "")):
        value = _arguments(block)
        if isinstance(value.get("name"), str):
            calls.append(ToolCall(value["name"], _arguments(value.get("arguments", {})), f"call_{i}"))
    return tuple(calls)


class TextPolicyBackend:
    """Our own policy as a judge: generate(prompt_text, max_tokens) -> text (e.g. a shared.model Sampler's greedy
    decode); tool calls are read from <tool_call> blocks."""

    def __init__(self, generate: Callable[[str, int], str]):
        self.generate = generate

    def __call__(self, messages, tools, max_tokens, tool_choice=None) -> AgentReply:
        text = self.generate(render_messages(messages, tools), int(max_tokens))
        return AgentReply(_TOOL_CALL.sub("", text).strip(), parse_tool_calls(text))


# ------------------------------------------------------------------------------------------ the session

class _Session:
    """One case's state: the conversation, the unlocked tools, the budgets, the trace."""

    def __init__(self, agent: "JudgeAgent", case: JudgeCase):
        if case.contract not in LABEL_CONTRACTS:
            raise ValueError(f"JudgeCase: contract {case.contract!r}, expected one of {', '.join(LABEL_CONTRACTS)}")
        self.agent, self.case = agent, case
        self.router = None
        if agent.skill is not None:
            self.router = ResourceRouter(agent.skill, agent.setting, family=case.family, **agent.router_options)
            self.router.mount(case.resources)
        self.skill_loaded = False
        self.sandbox_calls = 0
        self.label, self.reason, self.finalised = None, "", None
        self.trace: list[dict] = []
        self.messages = [{"role": "system", "content": agent.system_prompt},
                         {"role": "user", "content": render_case(case)}]

    def tools(self) -> list[dict]:
        names = ["use_skill", "final_answer"] if self.agent.skill is not None else ["final_answer"]
        if self.skill_loaded:
            names += ["list_resources", "view_resource", "python_sandbox"]
            if self.router.max_runs > 0:
                names.append("run_resource")
        elif self.agent.sandbox_without_skill:
            names.append("python_sandbox")
        return [TOOLS[n] for n in names]

    def accept(self, reply: AgentReply, stage: str) -> bool:
        """Records the reply and runs its tool calls; True when it gave a valid verdict."""
        message = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:   # servers refuse an empty tool_calls list
            message["tool_calls"] = [{"id": c.id or f"call_{i}", "type": "function",
                                      "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                     for i, c in enumerate(reply.tool_calls)]
        self.messages.append(message)
        for i, call in enumerate(reply.tool_calls):
            offered = {t["function"]["name"] for t in self.tools()} if stage == "tool" else {"final_answer"}
            result = self.run_tool(call, offered)
            self.trace.append({"stage": stage, "tool": call.name, "arguments": call.arguments, "result": result})
            self.messages.append({"role": "tool", "tool_call_id": call.id or f"call_{i}",
                                  "content": json.dumps(result)[:self.agent.limits.max_output_chars * 2]})
            if self.label is not None:
                self.finalised = stage
                return True
        if not reply.tool_calls:
            label = parse_label(reply.text, self.case.contract)
            self.trace.append({"stage": stage, "text": reply.text[:500], "label": label})
            if label is not None:
                self.label, self.finalised = label, ("text" if stage == "tool" else stage)
                return True
        return False

    def run_tool(self, call: ToolCall, offered: set) -> dict:
        limits = self.agent.limits
        if call.name not in offered:
            return {"error": f"tool {call.name!r} is not available now (available: {', '.join(sorted(offered))})"}
        if "__malformed__" in call.arguments:
            return {"error": "arguments are not a JSON object"}
        if call.name == "final_answer":
            label = canonical_label(call.arguments.get("verdict"), self.case.contract)
            if label is None:
                return {"error": f"verdict {call.arguments.get('verdict')!r} is not one of "
                                 f"{', '.join(LABEL_CONTRACTS[self.case.contract])}"}
            self.label, self.reason = label, str(call.arguments.get("reason", ""))
            return {"accepted": label}
        if call.name == "use_skill":
            self.skill_loaded = True
            return {"skill": self.agent.skill.name, "instructions": self.agent.skill.body,
                    "resources": [r.index_entry() for r in self.router.available()]}
        if call.name == "list_resources":
            return {"resources": [r.index_entry() for r in self.router.available()]}
        try:
            if call.name == "view_resource":
                return {"id": call.arguments.get("id"), "text": self.router.view(str(call.arguments.get("id")))}
            if call.name == "run_resource":
                result = self.router.run(str(call.arguments.get("id")), self.case.prompt, self.case.candidates)
                return {"status": result.status, "value": result.value, "message": result.message[:500]}
        except ResourceRefused as e:
            return {"error": str(e)}
        if call.name == "python_sandbox":
            code = str(call.arguments.get("code", ""))
            if self.sandbox_calls >= limits.max_sandbox_calls:
                return {"error": f"sandbox budget spent ({limits.max_sandbox_calls} runs per case)"}
            if len(code) > limits.max_code_chars:
                return {"error": f"code of {len(code)} characters is over the limit of {limits.max_code_chars}"}
            self.sandbox_calls += 1
            from shared.rewards.sandbox import run_python

            preamble = f"prompt = {json.dumps(self.case.prompt)}\ncandidates = {json.dumps(list(self.case.candidates))}\n"
            result = run_python(preamble + code, [()], entry=None, timeout_s=limits.sandbox_timeout_s,
                                backend=self.agent.sandbox_backend)
            return {"status": result.status, "stdout": result.stdout[-limits.max_output_chars:],
                    "message": result.message[:500]}
        return {"error": f"unknown tool {call.name!r}"}

    def result(self, steps: int, calls: int) -> AgentResult:
        valid = self.label is not None
        label = self.label if valid else self.agent.fallback.get(self.case.contract)
        router = self.router
        return AgentResult(label, valid, self.finalised if valid else "fallback", steps, calls,
                           router.views if router else 0, router.runs if router else 0, self.sandbox_calls,
                           router.cost if router else 0.0, tuple(router.used) if router else (), self.reason,
                           self.trace, self.case.contract)


class JudgeAgent:
    """See the module docstring. skill: a loaded package (None: a tool-less baseline, or tool_only with
    sandbox_without_skill=True); setting: the router's setting; router_options: ResourceRouter's budgets
    (max_views, max_chars, max_runs, sandbox_timeout_s); fallback: the label per contract when nothing valid came
    (default FALLBACK_LABELS: a tie where the contract has one)."""

    def __init__(self, backend, *, skill: Skill | None = None, setting: str = "fair",
                 limits: AgentLimits = AgentLimits(), router_options: dict | None = None,
                 system_prompt: str = SYSTEM_PROMPT, sandbox_without_skill: bool = False, sandbox_backend=None,
                 fallback: dict | None = None):
        self.backend, self.skill, self.setting, self.limits = backend, skill, setting, limits
        self.router_options = dict(router_options or {})
        self.system_prompt, self.sandbox_without_skill = system_prompt, bool(sandbox_without_skill)
        self.sandbox_backend = sandbox_backend
        self.fallback = dict(FALLBACK_LABELS, **(fallback or {}))

    def _call(self, session: _Session, messages, tools, max_tokens, tool_choice, stage) -> AgentReply | None:
        try:
            return self.backend(messages, tools, max_tokens, tool_choice)
        except JudgeError as e:
            session.trace.append({"stage": stage, "error": str(e)[:500]})
            return None

    def judge(self, case: JudgeCase) -> AgentResult:
        session, limits = _Session(self, case), self.limits
        steps = calls = 0
        while steps < limits.max_steps:
            steps += 1
            calls += 1
            reply = self._call(session, session.messages, session.tools(), limits.max_tokens, limits.tool_choice,
                               "tool")
            if reply is None:
                break
            if session.accept(reply, "tool"):
                return session.result(steps, calls)
        labels = ", ".join(LABEL_CONTRACTS[case.contract])
        stages = []
        if limits.forced_finalisation:
            stages.append(("forced", f"Stop using tools. Reply now with only a JSON object {{\"verdict\": ..., "
                                     f"\"reason\": ...}} whose verdict is one of: {labels}."))
        if limits.text_retry:
            stages.append(("retry", f"Your reply had no valid verdict. Reply with exactly one of: {labels}."))
        for stage, instruction in stages:
            session.messages.append({"role": "user", "content": instruction})
            calls += 1
            reply = self._call(session, session.messages, None, limits.final_max_tokens, None, stage)
            if reply is not None and session.accept(reply, stage):
                return session.result(steps, calls)
        if limits.emergency:
            messages = [{"role": "system", "content": DIRECT_PROMPT.format(labels=labels)},
                        {"role": "user", "content": render_case(case)}]
            calls += 1
            reply = self._call(session, messages, None, limits.emergency_max_tokens, None, "emergency")
            if reply is not None:
                label = parse_label(reply.text, case.contract)
                session.trace.append({"stage": "emergency", "text": reply.text[:500], "label": label})
                if label is not None:
                    session.label, session.finalised = label, "emergency"
        return session.result(steps, calls)


class JudgeAgentEnvironment(Environment):
    """The judge session as a shared.agent Environment (a policy's text turns; tool calls in <tool_call> blocks):
    reset(case) -> the rendered conversation; step(text) -> the tool results, a forced-finalisation instruction
    once max_steps turns passed without a verdict, or None when done. `result()` after the episode gives the
    AgentResult (fallback when no valid verdict came); StepResult.reward is 1 for a valid verdict, else 0 (the
    caller scores correctness)."""

    stop_strings = ("</tool_call>",)

    def __init__(self, agent: JudgeAgent):
        self.agent = agent
        self.session: _Session | None = None
        self.turns = 0
        self.forced = False

    def reset(self, example: JudgeCase) -> str:
        self.session, self.turns, self.forced = _Session(self.agent, example), 0, False
        return render_messages(self.session.messages, self.session.tools())

    def step(self, policy_text: str):
        session = self.session
        self.turns += 1
        reply = AgentReply(_TOOL_CALL.sub("", policy_text).strip(), parse_tool_calls(policy_text))
        if session.accept(reply, "forced" if self.forced else "tool"):
            return StepResult(None, 1.0)
        if self.forced:
            return StepResult(None, 0.0)
        if self.turns >= self.agent.limits.max_steps:
            self.forced = True
            labels = ", ".join(LABEL_CONTRACTS[session.case.contract])
            return f"\n<user>\nStop using tools. Reply now with only {{\"verdict\": ...}}, one of: {labels}.\n</user>\n"
        results = [m["content"] for m in session.messages[-len(reply.tool_calls):]] if reply.tool_calls else \
            ["no tool call and no verdict"]
        return "\n" + "\n".join(f"<tool_result>{r}</tool_result>" for r in results) + "\n"

    def result(self) -> AgentResult:
        return self.session.result(self.turns, self.turns)
