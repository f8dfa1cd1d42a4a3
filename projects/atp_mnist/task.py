"""TASKS "atp_mnist/pipeline": one seed of the ATP-MNIST pipeline table (spec ../shared/papers/atp_bench.md 4.3-4.6)
with the programmatic planner zoo (projects/atp_mnist/planners.py); TASKS "atp_mnist/zoo_eval": the same metrics for
the SFT-trained planners (experiments/atp_mnist/planners.py), their greedy answers to one seed's test items.

The seed draws the world's test items (MNIST glyphs, intents, documents) and the planners' own randomness; every
planner answers the same items, so planner differences are paired within a seed and by seed across points. Each
answer is parsed (shared.eval.interleaved), scored against its gold plan (shared.eval.plans: precision / recall /
F1, tool / anchor / argument accuracy, over- and under-use) and executed (projects/atp_mnist/executors.py: the
executed score E of spec 4.3, its visual and text-fact parts).

What this table can and cannot say: the programmatic planners are the gold plan with one systematic change each
(every visual generated, every visual retrieved, calls dropped, calls added, ...). So it checks that the world and
its executor separate the paradigms the paper contrasts (C1's direction: a generation-only planner fails the
factual intents, a retrieval-only one the creative intents) and that the gold-plan metrics see each profile (C3);
it does not test that trained planners behave so, nor anything about the judges (C2): those need the GPU tables.

Summary keys: <planner>/<metric> with metric in E, visual, facts, E_factual (ref / search / code intents),
E_creative (gen / edit intents), f1 (macro over items), micro_f1, precision, recall, tool_acc, anchor_acc,
arg_acc, overuse, underuse, calls_per_answer, f1_single (one required call), f1_multi (>= 2), parse_errors; plus
zoo/calls_ratio (the largest over the smallest non-zero mean calls per answer), classifier/acc (the executor's
digit classifier on held-out executor glyphs) and n_items.
"""
from __future__ import annotations

import time

import numpy as np

from shared.eval.interleaved import parse_interleaved
from shared.eval.plans import score_plan, summarize

FACTUAL_TOOLS = ("ref", "search", "code")   # a visual that must be real: the referenced, a retrieved or a chart
CREATIVE_TOOLS = ("gen", "edit")            # a visual that must be new: generated or transformed


def _mean(values) -> float:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else float("nan")


def planner_metrics(items, responses, executors) -> dict[str, float]:
    """Every metric of one planner's answers to `items` (same order)."""
    from projects.atp_mnist.executors import executed_score

    scores, executed, parse_errors = [], [], 0
    for item, response in zip(items, responses):
        parsed = parse_interleaved(response)
        parse_errors += bool(parsed.errors)
        scores.append(score_plan(parsed.calls, item.gold))
        executed.append(executed_score(item, parsed, executors.produce(item, parsed)))
    summary = summarize(scores)

    def by_kind(tools):
        return _mean(e["E"] for item, e in zip(items, executed) if item.gold and item.gold[0].tools[0] in tools)

    return {
        "E": _mean(e["E"] for e in executed), "visual": _mean(e["visual"] for e in executed),
        "facts": _mean(e["facts"] for e in executed),
        "E_factual": by_kind(FACTUAL_TOOLS), "E_creative": by_kind(CREATIVE_TOOLS),
        "f1": summary["macro_f1"], "micro_f1": summary["micro_f1"], "precision": summary["micro_precision"],
        "recall": summary["micro_recall"], "tool_acc": summary["tool_acc"], "anchor_acc": summary["anchor_acc"],
        "arg_acc": summary["arg_acc"], "overuse": summary["overuse_rate"], "underuse": summary["underuse_rate"],
        "calls_per_answer": summary["calls_per_answer"],
        "f1_single": _mean(s.f1 for item, s in zip(items, scores) if item.n_required == 1),
        "f1_multi": _mean(s.f1 for item, s in zip(items, scores) if item.n_required >= 2),
        "parse_errors": parse_errors / max(1, len(items)),
    }


def _world(o, seed: int):
    """(the seed's test items, executors, the summary's first keys) for config.atp_mnist `o`."""
    from projects.atp_mnist.executors import Executors
    from projects.atp_mnist.mnist import load_pool, synthetic_pool
    from projects.atp_mnist.world import generate

    pool = synthetic_pool(0, int(o.synthetic_per_digit)) if o.pool == "synthetic" else load_pool(o.pool_path)
    items = generate(pool, "test", int(o.n_test), seed)
    executors = Executors(pool, seed=seed)
    return items, executors, {"n_items": float(len(items)),
                               "classifier/acc": float(executors.classifier_accuracy)}


def _finish(summary: dict, names: list[str], started: float, workdir: str) -> None:
    """zoo/calls_ratio (largest over smallest non-zero calls per answer), wall time; writes summary.json."""
    from shared.train import write_summary

    calls = [summary[f"{name}/calls_per_answer"] for name in names if summary[f"{name}/calls_per_answer"] > 0]
    summary["zoo/calls_ratio"] = max(calls) / min(calls) if calls else float("nan")
    summary["wall_time_s"] = time.time() - started
    write_summary(workdir, summary)


def run(config, workdir: str) -> dict:
    from projects.atp_mnist.planners import PLANNERS

    started = time.time()
    o, seed = config.atp_mnist, int(config.seed)
    items, executors, summary = _world(o, seed)
    for name in o.planners:
        planner = PLANNERS[name]
        responses = [planner(item, seed) for item in items]
        for key, value in planner_metrics(items, responses, executors).items():
            summary[f"{name}/{key}"] = value
        print(f"[atp_mnist] seed {seed} {name}: E {summary[f'{name}/E']:.3f} F1 {summary[f'{name}/f1']:.3f} "
              f"calls/answer {summary[f'{name}/calls_per_answer']:.2f}", flush=True)
    _finish(summary, list(o.planners), started, workdir)
    return summary


def parse_runs(spec: str) -> list[tuple[str, str]]:
    """atp_mnist.runs: "name=path;name=path" (a sweep writes the paths with {stage:NAME}) -> [(name, path)]."""
    runs = []
    for part in filter(None, (p.strip() for p in str(spec).split(";"))):
        name, sep, path = part.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ValueError(f"atp_mnist.runs: {part!r} is not name=path (the key holds 'name=path;name=path')")
        runs.append((name.strip(), path.strip()))
    if not runs:
        raise ValueError("atp_mnist.runs is empty: name the trained planners' workdirs as 'name=path;name=path'")
    return runs


def run_zoo_eval(config, workdir: str) -> dict:
    """Each trained planner (a finished SFT workdir of experiments/atp_mnist/planners.py) answers the seed's test
    items greedily; the answers go through planner_metrics like the programmatic zoo's."""
    from projects.atp_mnist.world import prompt_text
    from shared.data import build_tokenizer
    from shared.train.load import load_run
    from shared.train.sft import greedy_completions

    started = time.time()
    o, seed = config.atp_mnist, int(config.seed)
    runs = parse_runs(o.runs)
    items, executors, summary = _world(o, seed)
    prompts = [prompt_text(item) + "\nAnswer:" for item in items]   # as rl/atp_mnist/plans writes them
    for name, path in runs:
        loaded = load_run(path)   # on the run's own mesh preset
        tokenizer = build_tokenizer(loaded.config.data, loaded.folder, int(loaded.config.model.vocab_size))
        # a LoadedRun carries what the SFT's greedy decoding reads of a Trainer (graphdef, params, config, mesh...)
        texts = greedy_completions(loaded, tokenizer, prompts, int(o.max_new_tokens),
                                   int(loaded.config.model.max_seq_len))
        for key, value in planner_metrics(items, texts, executors).items():
            summary[f"{name}/{key}"] = value
        print(f"[atp_mnist] seed {seed} {name} (step {loaded.step}): E {summary[f'{name}/E']:.3f} "
              f"F1 {summary[f'{name}/f1']:.3f} calls/answer {summary[f'{name}/calls_per_answer']:.2f}", flush=True)
    _finish(summary, [name for name, _ in runs], started, workdir)
    return summary
