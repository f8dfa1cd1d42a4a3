"""E1 of ../shared/papers/openrs.md section 4: aggregation and debiasing mechanics in simulation (numpy,
vectorised over pairs and criteria; 100k pairs x 5 error rates in about a second).

Latent truth per pair (every arm of a seed sees the same draws: arms are paired by seed):
  K criteria with fixed types (TYPES: 1 fatal, 2 core, 3 important, 2 highlight). Per non-fatal criterion a true
  comparison t in {-2..2} (positive: slot A better), P(0) = 0.3, P(+-1) = 0.2 each, P(+-2) = 0.15 each. The
  fatal criterion: a fatal flaw in `fatal_rate` (20%) of pairs, in A or B at random: t_fatal = -2 (A flawed) or +2;
  0 otherwise. Gold = sign of the veto aggregation of the truths (spec 1.4): a flawed response always loses, else
  the weighted majority of the criteria decides. Pairs whose gold is 0 are left out of every metric.
  Per-response latent scores (for the pointwise arm): q_B ~ U[4, 7], q_A = q_B + 1.5 t per non-fatal criterion;
  the fatal criterion is 9 for a clean response and 1 for a flawed one.

The criterion comparator (error rate e; position bias b = 0.15), per criterion and presentation order:
  with probability b, when the true score in that order is 0 or +-1, it reports +1 (slot A slightly better);
  otherwise with probability e it reports a uniformly drawn wrong score (one of the 4 other values), else the
  truth. The counterfactual without position bias reuses the same error draws (common random numbers), so a
  position-bias-induced error is a pair decided wrongly with the bias and not without it.

Arms (the `arm` config value):
  a  holistic: one judgment per pair: with probability b, when |S_true| < 1.5 (a true score of 0 or +-1), slot A;
     else with probability e the wrong response; else gold
  b  criterion-wise comparisons + weighted mean (no veto; the fatal criterion weighs as a core one, 5)
  c  b + fatal veto (spec 1.4 exactly)
  d  c + the bidirectional rule (both orders, spec 1.2 step 3, margin 0)
  e  pointwise scalarisation: each response scored alone per criterion on 1-10, reading = q + N(0, s_item) +
     a per-response calibration offset N(0, ratio * s_item) shared by its criteria; weighted sum of the readings;
     no position bias. s_item is matched to the comparator's error rate: a pairwise comparison of a one-step
     difference (1.5) read from two pointwise scores errs with probability e, s_item = 1.5 / (sqrt 2 z_{1-e}).
     `calibration_ratio` (arm e_cal0.5 / e_cal2) sets calibration noise below or above that comparison noise.

Metrics per error rate (keys "e<rate>/<metric>"): accuracy (SAME counts wrong, spec 1.6), tie_rate,
decided_accuracy (accuracy among non-ties), fatal_accuracy (accuracy on fatal-flaw pairs), bias_errors (rate of
position-bias-induced errors), bias_error_removal (1 - bias_errors / bias_errors of arm c; arms c and d only).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from shared.judges.rubric import DEFAULT_WEIGHTS, aggregate, bidirectional

TYPES = ("fatal", "core", "core", "important", "important", "important", "highlight", "highlight")
ARMS = ("a", "b", "c", "d", "e")
STEP = 1.5            # latent score units per step of a true comparison
METRICS = ("accuracy", "tie_rate", "decided_accuracy", "fatal_accuracy", "bias_errors", "bias_error_removal")


def error_key(rate: float) -> str:
    return f"e{rate:g}"


def draw(rng: np.random.Generator, n: int, fatal_rate: float) -> dict:
    """Latent truths and every random draw any arm uses, in a fixed order (so arms share them)."""
    k = len(TYPES)
    values = np.array([-2, -1, 0, 1, 2])
    t = rng.choice(values, size=(n, k), p=[0.15, 0.2, 0.3, 0.2, 0.15])
    flawed = rng.random(n) < fatal_rate
    flaw_in_a = rng.random(n) < 0.5
    t[:, 0] = np.where(flawed, np.where(flaw_in_a, -2, 2), 0)
    q_b = rng.uniform(4.0, 7.0, size=(n, k))
    q_a = q_b + STEP * t
    q_a[:, 0] = np.where(flawed & flaw_in_a, 1.0, 9.0)
    q_b[:, 0] = np.where(flawed & ~flaw_in_a, 1.0, 9.0)
    return {
        "t": t, "flawed": flawed, "q": np.stack([q_a, q_b]),
        # per order (0: as given, 1: swapped): bias and error uniforms, the wrong value's index
        "u_bias": rng.random((2, n, k)), "u_err": rng.random((2, n, k)), "wrong": rng.integers(0, 4, (2, n, k)),
        "u_bias_holistic": rng.random(n), "u_err_holistic": rng.random(n),
        "z_item": rng.standard_normal((2, n, k)), "z_cal": rng.standard_normal((2, n, 1)),
    }


def comparator(t_frame, u_bias, u_err, wrong, error_rate: float, position_bias: float, biased: bool = True):
    """Observed per-criterion scores in one presentation order (see the module docstring)."""
    candidate = wrong - 2
    wrong_value = candidate + (candidate >= t_frame)  # the 4 values other than the truth
    observed = np.where(u_err < error_rate, wrong_value, t_frame)
    if biased:
        hit = (u_bias < position_bias) & (np.abs(t_frame) <= 1)
        observed = np.where(hit, 1, observed)
    return observed


def _sign(x):
    return np.sign(x).astype(np.int64)


def verdicts(d: dict, error_rate: float, position_bias: float, *, biased: bool = True,
             calibration_ratios=(0.5, 2.0), weights=DEFAULT_WEIGHTS) -> dict:
    """pref int [n] in {-1, 0, +1} per arm ("e_cal<ratio>" per calibration ratio) for one error rate."""
    t = d["t"]
    gold_score = aggregate(t, TYPES, weights)
    no_veto_weights = {**weights, "fatal": weights["core"]}
    fwd = comparator(t, d["u_bias"][0], d["u_err"][0], d["wrong"][0], error_rate, position_bias, biased)
    bwd = comparator(-t, d["u_bias"][1], d["u_err"][1], d["wrong"][1], error_rate, position_bias, biased)
    gold = _sign(gold_score)
    hit = biased & (d["u_bias_holistic"] < position_bias) & (np.abs(gold_score) < 1.5)
    holistic = np.where(hit, 1, np.where(d["u_err_holistic"] < error_rate, -gold, gold))
    s_f = aggregate(fwd, TYPES, weights)
    s_b = aggregate(bwd, TYPES, weights)
    out = {"a": holistic, "b": _sign(aggregate(fwd, TYPES, no_veto_weights, veto=False)), "c": _sign(s_f),
           "d": bidirectional(s_f, s_b, 0.0)}
    sigma = 0.0 if error_rate <= 0 else STEP / (np.sqrt(2) * statistics.NormalDist().inv_cdf(1 - error_rate))
    w = np.array([no_veto_weights[kind] for kind in TYPES])
    for ratio in calibration_ratios:
        reading = d["q"] + sigma * d["z_item"] + ratio * sigma * d["z_cal"]
        score = np.clip(reading, 1.0, 10.0) @ w
        out[f"e_cal{ratio:g}"] = _sign(score[0] - score[1])
    return out


def metrics(pref: np.ndarray, gold: np.ndarray, flawed: np.ndarray, counterfactual: np.ndarray) -> dict:
    keep = gold != 0
    pref, gold, flawed, counterfactual = pref[keep], gold[keep], flawed[keep], counterfactual[keep]
    correct = pref == gold
    decided = pref != 0
    wrong = decided & ~correct
    wrong_unbiased = (counterfactual != 0) & (counterfactual != gold)
    return {"accuracy": float(correct.mean()), "tie_rate": float((~decided).mean()),
            "decided_accuracy": float(correct[decided].mean()) if decided.any() else 0.0,
            "fatal_accuracy": float(correct[flawed].mean()) if flawed.any() else 0.0,
            "bias_errors": float((wrong & ~wrong_unbiased).mean())}


def simulate(seed: int, *, n_pairs: int, error_rates, position_bias: float = 0.15, fatal_rate: float = 0.2,
             calibration_ratios=(0.5, 2.0)) -> dict:
    """{arm: {"e<rate>/<metric>": value}} for every arm on one seed's draws."""
    d = draw(np.random.default_rng(seed), int(n_pairs), fatal_rate)
    gold = _sign(aggregate(d["t"], TYPES, DEFAULT_WEIGHTS))
    results: dict = {}
    for rate in error_rates:
        biased = verdicts(d, rate, position_bias, calibration_ratios=calibration_ratios)
        plain = verdicts(d, rate, position_bias, biased=False, calibration_ratios=calibration_ratios)
        key = error_key(rate)
        per_arm = {arm: metrics(pref, gold, d["flawed"], plain[arm]) for arm, pref in biased.items()}
        base = per_arm["c"]["bias_errors"]
        for arm in ("c", "d"):
            per_arm[arm]["bias_error_removal"] = 1.0 - per_arm[arm]["bias_errors"] / base if base > 0 else 0.0
        for arm, values in per_arm.items():
            results.setdefault(arm, {}).update({f"{key}/{name}": v for name, v in values.items()})
    return results


def run(config, workdir: str) -> dict:
    """The task openrs/e1_simulation: config.openrs.{arm, n_pairs, error_rates, position_bias, fatal_rate,
    calibration_ratio}; config.seed. Writes summary.json."""
    from shared.train import write_summary

    o = config.openrs
    start = time.perf_counter()
    arm = str(o.arm)
    ratios = (float(o.calibration_ratio),)
    results = simulate(int(config.seed), n_pairs=int(o.n_pairs), error_rates=list(o.error_rates),
                       position_bias=float(o.position_bias), fatal_rate=float(o.fatal_rate),
                       calibration_ratios=ratios)
    key = f"e_cal{ratios[0]:g}" if arm == "e" else arm
    summary = {**results[key], "seed": int(config.seed), "wall_time_s": time.perf_counter() - start}
    write_summary(workdir, summary)
    return summary
