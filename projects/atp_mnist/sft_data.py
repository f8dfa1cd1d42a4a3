"""The example set "rl/atp_mnist/plans": the world's items as SFT data for the trained planner zoo (spec 4.2).

    load_task("atp_mnist/plans", "train", 20000, seed=0, mixture="unified")

prompt = the symbolic-track planner input (world.prompt_text) + "\\nAnswer:"; completion = " " + the answer of the
programmatic planner named by `mixture` (planners.PLANNERS: unified = gold, gen_only, retrieval_only, tool_happy,
tool_shy, text_only, noisy), so one SFT recipe per mixture gives the spec's zoo; answer = the gold answer. Extra
columns: item_id, intent, gold_plan (JSON: [tools, anchor, args] per required call) and facts (JSON pairs), from
which the checker rebuilds the gold without the pool.

Checker (greedy accuracy of the SFT table): the completion's plan matches the gold plan exactly (plan F1 = 1,
anchors exact) and states every text fact. The executed score E needs the executors (pool, classifier): the
planner evaluation task reads it, not the checker.

Splits: train and test (the world's glyph halves; test uses the doc images train never shows); there is no OOD
split. Options: mixture, pool ("mnist" | "synthetic": procedural glyphs for CI), pool_path.
"""
from __future__ import annotations

import functools
import json

from shared.data.examples import check_split, register_task
from shared.eval.interleaved import parse_interleaved
from shared.eval.plans import GoldCall, score_plan

TASK = "atp_mnist/plans"
SPLITS = ("train", "test")


@functools.lru_cache(maxsize=4)
def _pool(pool: str, pool_path: str | None):
    from projects.atp_mnist.mnist import DEFAULT_PATH, load_pool, synthetic_pool

    return synthetic_pool(0, 60) if pool == "synthetic" else load_pool(pool_path or DEFAULT_PATH)


def gold_of(example: dict) -> list[GoldCall]:
    return [GoldCall(tuple(tools), int(anchor), tuple(tuple(kv) for kv in args))
            for tools, anchor, args in json.loads(example["gold_plan"])]


def check_plan(example: dict, completion: str) -> bool:
    """Exact plan (F1 = 1) and every fact stated as a whole word."""
    from projects.atp_mnist.executors import facts_stated

    parsed = parse_interleaved(completion)
    if score_plan(parsed.calls, gold_of(example)).f1 < 1.0:
        return False
    return facts_stated(json.loads(example["facts"]), parsed.text) == 1.0


@register_task(TASK, check_plan)
def plans(split: str, n: int, seed: int = 0, *, mixture: str = "unified", pool: str = "mnist",
          pool_path: str | None = None) -> list[dict]:
    from projects.atp_mnist.planners import PLANNERS
    from projects.atp_mnist.world import generate, gold_response, prompt_text

    check_split(TASK, split, SPLITS)
    if mixture not in PLANNERS:
        raise ValueError(f"rl/{TASK}: mixture={mixture!r} is not a planner (known: {', '.join(PLANNERS)})")
    planner = PLANNERS[mixture]
    examples = []
    for item in generate(_pool(pool, pool_path), split, n, seed):
        examples.append({
            "prompt": prompt_text(item) + "\nAnswer:", "completion": " " + planner(item, seed),
            "answer": gold_response(item), "task": TASK, "item_id": item.item_id, "intent": item.intent,
            "gold_plan": json.dumps([[list(g.tools), g.anchor, [list(kv) for kv in g.args]] for g in item.gold]),
            "facts": json.dumps([[k, str(v)] for k, v in item.facts]),
        })
    return examples
