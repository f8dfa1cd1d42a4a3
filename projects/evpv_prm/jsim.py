"""The J-sim runs (task "evpv_prm/jsim", ../shared/papers/evpv_prm.md §4.5 items 1-3): one point = one seed at one
(p_perc, p_ext), over every kept problem of the GSM8K split, N candidates each.

Per condition of the extracted facts ("" = as extracted; "drop<r>/", "flip<r>/" = DROP or FLIP at ratio r, for each
kind in evpv.corruptions and r in evpv.corruption_ratios) the summary holds, for the plain judge (reads Q~) and the
EVPV-conditioned judge (reads E, else Q~):
  step/<judge>/macro_f1             step macro-F1 over {correct, incorrect} (shared.eval.bon.step_macro_f1)
  step/<judge>/macro_f1_first_error the same against first-error labels (every step from the first -1 on is -1)
  step/<judge>/premise_recall       fraction of premise-misread steps (and their descendants) marked -1
  step/<judge>/first_error_acc      first predicted error at the labelled first error
  bon/<judge>/<gate>/<agg>@k        BoN@k, gate "ungated" or "gated" (s' = s p on premise-dependent correct steps,
                                    p from the checklist audit against E), agg one of the five aggregations; ties
                                    by the paper's rule ("any tied best correct")
  bonrt/<judge>/<gate>/<agg>@8      the same at k = 8 with a uniformly random tie-break (in expectation)
  rel/clean_mean, rel/misread_mean  mean reliability p of candidates without / with a premise misread
and, once per point: pass@k (any of the first k candidates correct), data/problems, data/read, data/steps,
data/candidate_accuracy. With corruptions, "<kind>/spearman/<metric>" is Spearman's rho between the ratios and
the metric (0 when the metric does not vary). k runs over evpv.ks for the "" condition, k = 8 (N) for the others.
"""
from __future__ import annotations

import os
import random
import time

import numpy as np

from projects.evpv_prm.analog import (Candidate, Problem, evpv_reference, jsim, load_problems, make_candidate, noise,
                                      reliability)
from shared.data.corrupt import drop_facts, flip_facts
from shared.eval.bon import bon_at_k, first_error_accuracy, pass_at_first_k, step_macro_f1
from shared.eval.prm import AGGREGATIONS, StepScores, aggregate, gate

JUDGES = ("plain", "evpv")
GATES = ("ungated", "gated")
SPEARMAN_METRICS = ("step/evpv/macro_f1", "step/evpv/premise_recall", "bon/evpv/gated/correctness_rate@8",
                    "bon/evpv/gated/geometric_mean@8", "bon/plain/gated/correctness_rate@8",
                    "bon/plain/gated/geometric_mean@8")


def _rng(*parts) -> random.Random:
    return random.Random("evpv/" + "/".join(str(p) for p in parts))


def _corrupt(facts: dict, kind: str, ratio: float, rng: random.Random) -> dict:
    items = sorted(facts.items())
    if kind == "drop":
        return dict(drop_facts(items, ratio, rng)[0])
    if kind == "flip":
        return dict(flip_facts(items, ratio, rng)[0])
    raise ValueError(f"evpv.corruptions: unknown kind {kind!r} (known: drop, flip)")


def _pad(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    out, mask = np.ones((len(rows), width), np.int64), np.zeros((len(rows), width), bool)
    for i, r in enumerate(rows):
        out[i, :len(r)], mask[i, :len(r)] = r, True
    return out, mask


def _first_error_labels(labels: np.ndarray, mask: np.ndarray) -> np.ndarray:
    after = np.cumsum(mask & (labels == -1), axis=1) > 0
    return np.where(after, -1, labels)


def jsim_judge(history: int = 12):
    """J-sim as a judge function (see evaluate_point): the plain judge reads Q~, the EVPV one E, else Q~."""
    def judge(name, problems, candidates, perceived, facts):
        if name == "plain":
            return [[jsim(p, c, q, history) for c, q in zip(cands, seen)]
                    for p, cands, seen in zip(problems, candidates, perceived)]
        return [[jsim(p, c, evpv_reference(q, f), history) for c, q in zip(cands, seen)]
                for p, cands, seen, f in zip(problems, candidates, perceived, facts)]
    return judge


def condition_metrics(problems: list[Problem], candidates: list[list[Candidate]],
                      verdicts: dict[str, list[list[np.ndarray]]], facts: list[dict], ks) -> dict:
    """Every metric of one condition of the extracted facts (see the module docstring); verdicts[judge] holds the
    +-1 step verdicts of each candidate of each problem for both judges ("plain", "evpv")."""
    n = len(candidates[0])
    labels, kinds, dependent, rows = [], [], [], {j: [] for j in JUDGES}
    p = []
    for i, (problem, cands, f) in enumerate(zip(problems, candidates, facts)):
        for ci, c in enumerate(cands):
            labels.append(c.labels)
            kinds.append(np.array([k in ("premise", "both") for k in c.kinds]))
            dependent.append(np.array([any(kind == "q" for kind, _ in op.operands) for op in problem.ops]))
            for judge in JUDGES:
                rows[judge].append(np.asarray(verdicts[judge][i][ci]))
            p.append(reliability(problem, c, f))
    label, mask = _pad(labels)
    premise, _ = _pad([k.astype(np.int64) for k in kinds])
    dep, _ = _pad([d.astype(np.int64) for d in dependent])
    correct = np.array([[c.correct for c in cands] for cands in candidates], bool)
    misread = np.array([c.misread is not None for cands in candidates for c in cands])
    p = np.array(p)
    out = {"rel/clean_mean": float(p[~misread].mean()) if (~misread).any() else 1.0,
           "rel/misread_mean": float(p[misread].mean()) if misread.any() else 1.0}
    fe_label = _first_error_labels(label, mask)
    premise_steps = mask & (premise == 1)
    for judge in JUDGES:
        pred, _ = _pad(rows[judge])
        out[f"step/{judge}/macro_f1"] = step_macro_f1(pred, label, mask)
        out[f"step/{judge}/macro_f1_first_error"] = step_macro_f1(pred, fe_label, mask)
        out[f"step/{judge}/premise_recall"] = float(np.mean(pred[premise_steps] == -1)) if premise_steps.any() else 0.0
        out[f"step/{judge}/first_error_acc"] = first_error_accuracy(pred, label, mask)
        raw = StepScores(pred.astype(np.float64), mask)
        for g in GATES:
            scores = raw if g == "ungated" else gate(raw, dep.astype(bool), p)
            for agg in AGGREGATIONS:
                s = aggregate(scores, agg).reshape(len(problems), n)
                for key, value in bon_at_k(s, correct, ks, ties="any").items():
                    out[f"bon/{judge}/{g}/{agg}{key[3:]}"] = value
                out[f"bonrt/{judge}/{g}/{agg}@{n}"] = bon_at_k(s, correct, (n,), ties="expected")[f"bon@{n}"]
    return out


def spearman(x, y) -> float:
    """Spearman's rho with average ranks for ties; 0 when either side is constant."""
    def ranks(v):
        v = np.asarray(v, np.float64)
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=np.float64)
        for value in np.unique(v):
            r[v == value] = r[v == value].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    if np.std(rx) == 0 or np.std(ry) == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def evaluate_point(problems: list[Problem], *, seed: int, p_perc: float, p_ext: float, n_candidates: int = 8,
                   p_misread: float = 0.35, p_slip: float = 0.2, perception: str = "problem", history: int = 12,
                   ks=(1, 2, 4, 8), corruptions=(), corruption_ratios=(), judge=None) -> dict:
    """The summary of one point (module docstring). Candidates depend only on (seed, problem), perception on (seed,
    problem[, candidate]) and p_perc, extraction on (seed, problem) and p_ext: points of one seed share their draws
    (common random numbers, so the grid's cells are paired by seed).

    judge(name, problems, candidates, perceived, facts) -> per problem, per candidate, the +-1 step verdicts of the
    judge `name` ("plain": may ignore facts; "evpv"); default J-sim (jsim_judge(history)). The plain judge is asked
    once, the EVPV one once per condition of the facts."""
    judge = judge or jsim_judge(history)
    candidates, perceived, extracted = [], [], []
    for problem in problems:
        rng = _rng("candidates", seed, problem.qid)
        cands = [make_candidate(problem, rng, p_misread, p_slip) for _ in range(n_candidates)]
        if perception == "problem":
            q = noise(problem.numbers, p_perc, _rng("perception", seed, problem.qid))
            seen = [q] * n_candidates
        elif perception == "candidate":
            seen = [noise(problem.numbers, p_perc, _rng("perception", seed, problem.qid, i))
                    for i in range(n_candidates)]
        else:
            raise ValueError(f"evpv.perception={perception!r}: must be 'problem' or 'candidate'")
        candidates.append(cands)
        perceived.append(seen)
        extracted.append(dict(enumerate(noise(problem.numbers, p_ext, _rng("extractor", seed, problem.qid)))))
    correct = np.array([[c.correct for c in cands] for cands in candidates], bool)
    out = {**pass_at_first_k(correct, range(1, n_candidates + 1)),
           "data/problems": len(problems), "data/steps": int(sum(len(p.ops) for p in problems)),
           "data/candidate_accuracy": float(correct.mean())}
    plain = judge("plain", problems, candidates, perceived, extracted)

    def metrics_for(facts, ks):
        verdicts = {"plain": plain, "evpv": judge("evpv", problems, candidates, perceived, facts)}
        return condition_metrics(problems, candidates, verdicts, facts, ks)

    out.update(metrics_for(extracted, ks))
    for kind in corruptions:
        series = {m: [] for m in SPEARMAN_METRICS}
        for ratio in corruption_ratios:
            facts = [_corrupt(f, kind, ratio, _rng("corrupt", seed, p.qid, kind, ratio))
                     for p, f in zip(problems, extracted)]
            metrics = metrics_for(facts, (n_candidates,))
            out.update({f"{kind}{ratio:g}/{k}": v for k, v in metrics.items()})
            for m in SPEARMAN_METRICS:
                series[m].append(metrics[m])
        for m, values in series.items():
            out[f"{kind}/spearman/{m}"] = spearman(corruption_ratios, values)
    return out


def run(config, workdir: str) -> dict:
    """The task evpv_prm/jsim: config.evpv (see experiments/evpv_prm/grid.py); writes summary.json."""
    from shared.train import write_summary

    e = config.evpv
    start = time.perf_counter()
    problems, read = load_problems(resolve_data(str(e.data_path)), int(e.n_problems))
    summary = evaluate_point(
        problems, seed=int(config.seed), p_perc=float(e.p_perc), p_ext=float(e.p_ext),
        n_candidates=int(e.n_candidates), p_misread=float(e.p_misread), p_slip=float(e.p_slip),
        perception=str(e.perception), history=int(e.history), ks=tuple(int(k) for k in e.ks),
        corruptions=tuple(e.corruptions), corruption_ratios=tuple(float(r) for r in e.corruption_ratios))
    summary.update({"data/read": read, "seed": int(config.seed), "wall_time_s": time.perf_counter() - start})
    write_summary(workdir, summary)
    return summary


EMBEDDED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "smoke.jsonl")


def resolve_data(path: str) -> str:
    """evpv.data_path: "embedded" (projects/evpv_prm/data/smoke.jsonl), a GSM8K .jsonl file, relative to the
    working directory (the repository root when launched as documented)."""
    if path == "embedded":
        return EMBEDDED
    if not os.path.isfile(path):
        raise ValueError(f"evpv.data_path={path!r}: no such file (a GSM8K jsonl such as "
                         f"../shared/data/gsm8k/test.jsonl, or 'embedded')")
    return path
