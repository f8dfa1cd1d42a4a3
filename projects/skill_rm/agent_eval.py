"""The judge agent (shared/judges/agent.py) with the HeteroJudge skill package on the mixture's evaluation cases:
the paper's setting (an LLM choosing evidence through tools) where a served model exists; TASKS
"skill_rm/agent_eval".

Per case the router gets the case's own resources, mounted under the package's rules: GSM8K a reference answer
(view) and an exact-match verifier (run), IF the constraint checkers (run), HH nothing (the package's rubric
only). Settings: "none" (a direct judge: no skill, no tools), "fair" (visible text: rubric, python sandbox),
"operational" (also the mounted references and verifiers). Backends: "http" (an OpenAI-compatible endpoint with
tool calling, shared/judges/agent.py ChatBackend) or "rule" (RuleBackend: a fixed procedure that runs a verifier
when one is listed, else views a reference, else answers Tie; it stands in for the model in :smoke and the tests,
and is no result about any model).
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import time

import numpy as np

from projects.skill_rm.data import FAMILIES, build_mixture
from projects.skill_rm.evidence import IF_CHECKERS
from shared.judges.agent import AgentLimits, AgentReply, ChatBackend, JudgeAgent, JudgeCase, ToolCall

SETTINGS = ("none", "fair", "operational")


def mounted_resources(case: dict) -> list[dict]:
    """The case's own resources (spec 1.3 operational: references, verifiers; never the gold label)."""
    rule = {"allowed_setting": ["operational"], "leakage_level": "reference", "applies_to": [case["family"]]}
    if case["family"] == "gsm8k":
        reference = case["reference"]
        verifier = ("import re\n\ndef check(prompt, candidates):\n    out = []\n    for c in candidates:\n"
                    "        m = re.search(r'####\\s*(-?[\\d,.]+)\\s*$', c.strip())\n"
                    f"        out.append(m is not None and m.group(1).replace(',', '') == {reference!r})\n"
                    "    return out\n")
        return [dict(rule, id="reference_answer", type="reference", text=f"Reference final answer: {reference}",
                     cost=1), dict(rule, id="exact_match", type="verifier", text=verifier, cost=3)]
    if case["family"] == "if":
        checker = IF_CHECKERS + (f"\nCONSTRAINTS = {case['constraints']!r}\n\n"
                                 "def check(prompt, candidates):\n"
                                 "    return [satisfied(c, CONSTRAINTS) for c in candidates]\n")
        return [dict(rule, id="constraint_checkers", type="verifier", text=checker, cost=3)]
    return []


class RuleBackend:
    """A fixed procedure over the agent's tools (see the module docstring): use_skill; run the case's verifier
    and prefer the candidate it scores higher; else view the case's reference and prefer the candidate
    whose final number equals it; else Tie. It reads only what the tools returned."""

    def __call__(self, messages, tools, max_tokens, tool_choice=None) -> AgentReply:
        names = {t["function"]["name"] for t in tools or []}
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        if "use_skill" in names and not results:
            return AgentReply(tool_calls=(ToolCall("use_skill", {}),))
        if not tools:
            return AgentReply('{"verdict": "Tie"}')
        last = results[-1] if results else {}
        if "resources" in last:
            listed = last["resources"]
            # the case's mounted resources are listed after the package's: take the last of each type
            verifier = next((r["id"] for r in reversed(listed) if r["type"] == "verifier"), None)
            reference = next((r["id"] for r in reversed(listed) if r["type"] == "reference"), None)
            if verifier and "run_resource" in names:
                return AgentReply(tool_calls=(ToolCall("run_resource", {"id": verifier}),))
            if reference:
                return AgentReply(tool_calls=(ToolCall("view_resource", {"id": reference}),))
        return AgentReply(tool_calls=(ToolCall("final_answer", {"verdict": self._verdict(messages, last)}),))

    @staticmethod
    def _verdict(messages, last) -> str:
        value = last.get("value")
        if isinstance(value, list) and len(value) == 2 and value[0] != value[1]:
            return "A" if value[0] > value[1] else "B"
        text = last.get("text") or ""
        m = re.search(r"(-?[\d.]+)\s*$", text)
        if m:
            case = messages[1]["content"]
            finals = re.findall(r"####\s*(-?[\d,.]+)", case)
            hits = [f.replace(",", "") == m.group(1) for f in finals[-2:]]
            if len(hits) == 2 and hits[0] != hits[1]:
                return "A" if hits[0] else "B"
        return "Tie"


def build_agent(o, skill):
    if o.backend == "rule":
        backend = RuleBackend()
    else:
        from shared.judges.http import ChatClient

        clients = [ChatClient(url or None, o.model or None, timeout=float(o.timeout_s), owner="skill_rm.agent")
                   for url in (o.base_urls or [""])]
        # vLLM / SGLang read chat_template_kwargs from the request body (thinking off, spec section 2)
        backend = ChatBackend(clients, chat_template_kwargs={"enable_thinking": False}) if o.thinking_off \
            else ChatBackend(clients)
    limits = AgentLimits(max_steps=int(o.max_steps), max_sandbox_calls=int(o.max_sandbox_calls),
                         max_tokens=int(o.max_tokens))
    router = {"max_views": int(o.max_views), "max_chars": int(o.max_chars),
              "max_runs": int(o.max_runs) if o.setting == "operational" else 0}
    setting = "fair" if o.setting == "none" else o.setting
    return JudgeAgent(backend, skill=None if o.setting == "none" else skill, setting=setting, limits=limits,
                      router_options=router)


def run(config, workdir: str) -> dict:
    from projects.skill_rm.task import SKILL_DIR
    from shared.judges.skills import load_skill
    from shared.train import write_summary

    o, a = config.skill_rm, config.skill_rm.agent
    start = time.perf_counter()
    skill = load_skill(o.skill_dir or SKILL_DIR)
    cases = build_mixture(int(config.seed), {"eval": int(a.n_eval)}, source=o.source, p_strip=float(o.p_strip),
                          p_propagated=float(o.p_propagated), gsm8k_path=o.gsm8k_path, hh_path=o.hh_path)["eval"]
    agent = build_agent(a, skill)
    jobs = [JudgeCase(c["prompt"], [c["a"], c["b"]], "pairwise", c["family"], mounted_resources(c)) for c in cases]
    # cases are independent sessions: judged concurrently (the endpoint's throughput), results in case order
    with concurrent.futures.ThreadPoolExecutor(max(1, int(a.concurrency))) as pool:
        results = list(pool.map(agent.judge, jobs))
    pref = np.array([r.pref for r in results])
    gold = np.array([c["gold"] for c in cases])
    family = np.array([c["family"] for c in cases])
    got = np.where(pref == 0, 0.5, (pref == gold).astype(float))
    summary = {"n_cases": len(cases), "accuracy": float(got.mean()), "tie_rate": float(np.mean(pref == 0)),
               "invalid_rate": float(np.mean([not r.valid for r in results]))}
    for f in FAMILIES:
        summary[f"{f}/accuracy"] = float(got[family == f].mean())
    for key in ("calls", "resource_views", "resource_runs", "sandbox_calls", "resource_cost"):
        summary[f"mean_{key}"] = float(np.mean([getattr(r, key) for r in results]))
    for stage in ("tool", "text", "forced", "retry", "emergency", "fallback"):
        summary[f"finalised/{stage}"] = float(np.mean([r.finalised == stage for r in results]))
    summary["wall_time_s"] = time.perf_counter() - start
    with open(os.path.join(workdir, "traces.jsonl"), "w", encoding="utf-8") as f:
        for c, r in zip(cases, results):
            f.write(json.dumps({"family": c["family"], "gold": c["gold"], "label": r.label,
                                "finalised": r.finalised, "used": list(r.used_resources),
                                "trace": r.trace}, default=str)[:20000] + "\n")
    write_summary(workdir, summary)
    print(f"[skill_rm/agent_eval] setting {a.setting}, backend {a.backend}: accuracy {summary['accuracy']:.3f}, "
          f"invalid {summary['invalid_rate']:.3f}", flush=True)
    return summary
