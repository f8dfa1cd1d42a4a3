"""The OpenRS judge on a pair set (spec 1.6, and E4 of section 4 once an endpoint exists): the task
"openrs/judge_eval" builds a RubricJudge on an OpenAI-compatible endpoint (config.openrs: base_url, model, ...;
shared.judges.http.ChatClient with the reference's call settings, spec 1.5) and judges every pair with chosen in
slot A (the bidirectional rule also asks the swapped order).

Pair sets (config.openrs.pairs):
  hh_harmless  the shipped HH-RLHF harmless-base test pairs (../shared/data/preferences/hh_rlhf/), the first n_pairs
  gsm8k        GSM8K test problems: chosen = the gold solution, rejected = the same solution with its final answer
               changed; the GT gate (final-number check, spec 1.2 step 1) decides before the judge
  embedded     EMBEDDED below: a few hand-written pairs (CI smoke runs)

Summary (JudgeBench/PPE protocol, spec 1.6): accuracy = GOOD / all (SAME, malformed and failed calls count as
wrong), bad_rate, tie_rate, malformed_rate, gate_decided_rate, and the judge's cost counters (calls, requests,
retries, tokens, seconds).
"""
from __future__ import annotations

import json
import os
import re
import time

import numpy as np

EMBEDDED = [
    {"prompt": "What is the capital of France?", "chosen": "The capital of France is Paris.",
     "rejected": "The capital of France is Lyon, a city known for its food."},
    {"prompt": "How do I boil an egg?", "chosen": "Put the egg in boiling water for 8-10 minutes, then cool it.",
     "rejected": "Eggs are a good source of protein."},
    {"prompt": "Give me a synonym for 'happy'.", "chosen": "Joyful.", "rejected": "Sad."},
    {"prompt": "What is 12 * 12?", "chosen": "144", "rejected": "124", "ground_truth": "144"},
]
GSM8K_PATH = "../shared/data/gsm8k/test.jsonl"
HH_PATH = "../shared/data/preferences/hh_rlhf/harmless-base-test.jsonl.gz"


def final_number(text: str) -> str | None:
    """The last number in a text (commas dropped), e.g. GSM8K's '#### 72'."""
    found = re.findall(r"-?\d[\d,]*(?:\.\d+)?", text or "")
    return found[-1].replace(",", "") if found else None


def gt_check(prompt: str, response: str, truth) -> int:
    """+1 when the response's final number equals the ground truth, -1 otherwise (a missing answer included)."""
    answer = final_number(response)
    return 1 if answer is not None and answer == str(truth).replace(",", "") else -1


def load_pairs(kind: str, n: int, path: str = "") -> list[dict]:
    if kind == "embedded":
        return [dict(p) for p in EMBEDDED][:n or None]
    if kind == "hh_harmless":
        from shared.rm.data import pair_record
        from shared.data.records import read_records

        path = path or HH_PATH
        if not os.path.exists(path):
            raise FileNotFoundError(f"openrs.data_path: {path} does not exist (the HH-RLHF harmless-base file)")
        pairs = []
        for where, record in read_records(path):
            pairs.append(pair_record(record, where))
            if n and len(pairs) >= n:
                break
        return pairs
    if kind == "gsm8k":
        path = path or GSM8K_PATH
        if not os.path.exists(path):
            raise FileNotFoundError(f"openrs.data_path: {path} does not exist (GSM8K test.jsonl)")
        pairs = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                truth = record["answer"].split("####")[-1].strip().replace(",", "")
                solution = re.sub(r"<<[^>]*>>", "", record["answer"])
                wrong = str(int(float(truth)) + 1 + len(pairs) % 5) if re.fullmatch(r"-?\d+", truth) else truth + "1"
                pairs.append({"prompt": record["question"], "chosen": solution,
                              "rejected": solution.rsplit("####", 1)[0] + "#### " + wrong, "ground_truth": truth,
                              "query_type": "math"})
                if n and len(pairs) >= n:
                    break
        return pairs
    raise ValueError(f"openrs.pairs={kind!r}: expected hh_harmless, gsm8k or embedded")


def build_judge(o):
    """The RubricJudge of config.openrs: an HTTP backend (ChatClient) with the prompt folder and the gates."""
    from shared.judges.http import ChatClient
    from shared.judges.rubric import RubricJudge, chat_generate
    from shared.rewards.sandbox import GTGate

    from shared.config import ConfigError

    try:
        client = ChatClient(o.base_url or None, o.model or None, api_key_env=o.api_key_env, timeout=o.timeout,
                            retries=o.retries, concurrency=o.concurrency, owner="openrs/judge_eval")
    except ValueError as e:  # no endpoint named: a config error (one line, exit 2), not a crash
        raise ConfigError(f"openrs.base_url / openrs.model: {e}") from None
    generate = chat_generate(client, temperature=o.temperature, top_p=o.top_p, seed=o.judge_seed,
                             max_tokens=o.max_tokens)
    gates = [GTGate(gt_check)] if o.gt_gate else []
    return RubricJudge(generate, o.prompt_dir, weights=dict(o.weights), veto=o.veto, min_score=o.min_score,
                       bidirectional=o.bidirectional, json_retries=o.json_retries, gates=gates), client


def run(config, workdir: str) -> dict:
    from shared.train import write_summary

    o = config.openrs
    start = time.perf_counter()
    pairs = load_pairs(o.pairs, int(o.n_pairs), o.data_path)
    judge, client = build_judge(o)
    columns = {}
    for key in ("ground_truth", "query_type"):
        if any(key in p for p in pairs):
            columns[key] = [p.get(key, o.query_type or None) if key == "query_type" else p.get(key) for p in pairs]
    if "query_type" not in columns and o.query_type:
        columns["query_type"] = [o.query_type] * len(pairs)
    verdicts = judge.compare([p["prompt"] for p in pairs], [p["chosen"] for p in pairs],
                             [p["rejected"] for p in pairs], columns=columns)
    pref = np.asarray([v.pref for v in verdicts])
    cost = judge.cost()
    n = max(len(pairs), 1)
    summary = {"n_pairs": len(pairs), "accuracy": float(np.mean(pref == 1)), "bad_rate": float(np.mean(pref == -1)),
               "tie_rate": float(np.mean(pref == 0)),
               "malformed_rate": float(sum(v.malformed for v in verdicts) / n),
               "gate_decided_rate": float(cost.get("gate_decided", 0) / n),
               "unknown_query_types": sorted(judge.prompts.unknown_types),
               "wall_time_s": time.perf_counter() - start}
    summary.update({f"judge/{k}": float(v) for k, v in cost.items() if k != "seconds"})
    summary.update({f"judge/{k}": float(v) for k, v in client.cost().items()})
    with open(os.path.join(workdir, "verdicts.jsonl"), "w", encoding="utf-8") as f:
        for p, v in zip(pairs, verdicts):
            f.write(json.dumps({"prompt": p["prompt"][:200], "pref": v.pref, "scores": v.scores,
                                "malformed": v.malformed, "error": v.error, "critique": v.critique}) + "\n")
    write_summary(workdir, summary)
    return summary
