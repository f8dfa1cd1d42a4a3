"""The claims of the EVPV-PRM ledger (../shared/papers/evpv_prm.md §4.6), as data for
`python -m shared.stats.ledger --project evpv_prm`, which writes the README's ledger table and results/ledger.json.

Grid (results/grid): every cell of a seed shares the candidates and the noise draws, and both judges and both gate
settings are columns of the same row, so differences are paired by seed. Corruption (results/corruption): one row per
seed; a Spearman criterion is a one-sample interval against the level -0.9.
"""
import os

from shared.stats.claims import Arm, Claim, Level

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GRID = "projects/evpv_prm/results/grid"
CORRUPTION = "projects/evpv_prm/results/corruption"
J_SIM = "J-sim judge (exact arithmetic + premise check), spec §4.4"


def cell(p_perc: str, p_ext: str, column: str, label: str) -> Arm:
    return Arm({"evpv.p_perc": p_perc, "evpv.p_ext": p_ext}, column, f"{label} (p_perc {p_perc}, p_ext {p_ext})")


CLAIMS = []
for p_perc in ("0.1", "0.2", "0.3"):
    for p_ext in ("0.0", "0.05"):
        CLAIMS.append(Claim(
            f"(i) F1 p_perc {p_perc} p_ext {p_ext}", f"EVPV-conditioned judge step macro-F1 ≥ plain judge + 3 points, "
            f"p_perc = {p_perc}, p_ext = {p_ext}", results=GRID,
            a=cell(p_perc, p_ext, "step/evpv/macro_f1", "EVPV"), b=cell(p_perc, p_ext, "step/plain/macro_f1", "plain"),
            direction="greater", margin=0.03, paired=True, paper="§4.6 (i); VisualProcessBench 67.46 vs 62.0",
            note=J_SIM))
for p_perc in ("0.1", "0.2", "0.3"):
    CLAIMS.append(Claim(
        f"(i) recall p_perc {p_perc}", f"… driven by recall on premise-misread steps: EVPV recall > plain recall, "
        f"p_perc = {p_perc}, p_ext = 0.05", results=GRID,
        a=cell(p_perc, "0.05", "step/evpv/premise_recall", "EVPV"),
        b=cell(p_perc, "0.05", "step/plain/premise_recall", "plain"), direction="greater", margin=0.0, paired=True,
        paper="§4.6 (i)", note="premise-misread steps and the steps computed from them"))

for judge, judge_text in (("plain", "plain judge"), ("evpv", "EVPV-conditioned judge")):
    for agg in ("correctness_rate", "geometric_mean"):
        CLAIMS.append(Claim(
            f"(ii) {judge} {agg}", f"Gated BoN@8 > ungated BoN@8 by ≥ 2 points, {agg}, {judge_text}, p_perc = 0.2, "
            f"p_ext = 0.05", results=GRID,
            a=cell("0.2", "0.05", f"bon/{judge}/gated/{agg}@8", "gated"),
            b=cell("0.2", "0.05", f"bon/{judge}/ungated/{agg}@8", "ungated"), direction="greater", margin=0.02,
            paired=True, paper="§4.6 (ii); BoN@8 +8.83 to +9.78 points (InternVL2.5 8B-38B)",
            note="ties: any tied best candidate correct (the released script's rule); random tie-break in "
                 "`bonrt/*` columns of results/grid"))
    for agg in ("position_weighted", "streak", "first_error"):
        CLAIMS.append(Claim(
            f"(ii) {judge} {agg} not worse", f"Gating never costs > 0.5 points of BoN@8, {agg}, {judge_text}, "
            f"p_perc = 0.2, p_ext = 0.05", results=GRID,
            a=cell("0.2", "0.05", f"bon/{judge}/gated/{agg}@8", "gated"),
            b=cell("0.2", "0.05", f"bon/{judge}/ungated/{agg}@8", "ungated"), direction="greater", margin=-0.005,
            paired=True, paper="§4.6 (ii)",
            note="first_error reads only s < 0, which the gate never creates" if agg == "first_error" else ""))

for metric, text in (("step/evpv/macro_f1", "EVPV judge step macro-F1"),
                     ("bon/evpv/gated/correctness_rate@8", "gated BoN@8 (correctness rate, EVPV judge)"),
                     ("bon/evpv/gated/geometric_mean@8", "gated BoN@8 (geometric mean, EVPV judge)")):
    CLAIMS.append(Claim(
        f"(iii) FLIP {metric.split('/')[-1].split('@')[0]}", f"{text} falls monotonically with the FLIP ratio: "
        f"Spearman ρ ≤ −0.9 over the six ratios (p_perc = 0.2, p_ext = 0)", results=CORRUPTION,
        a=Arm({"arm": "corruption"}, f"flip/spearman/{metric}", "ρ"), b=-0.9, direction="less", margin=0.0,
        paired=True, paper="§4.6 (iii); abstract: corruption degrades performance monotonically",
        note="ρ is zero for a metric that does not vary"))
for agg in ("correctness_rate", "geometric_mean"):
    CLAIMS.append(Claim(
        f"(iii) DROP 1.0 {agg}", f"Under DROP the gate falls back to the ungated baseline, not below: gated BoN@8 at "
        f"DROP 1.0 ≥ plain ungated BoN@8 − 0.5 points, {agg}", results=CORRUPTION,
        a=Arm({"arm": "corruption"}, f"drop1/bon/evpv/gated/{agg}@8", "EVPV gated, DROP 1.0"),
        b=Arm({"arm": "corruption"}, f"drop1/bon/plain/ungated/{agg}@8", "plain ungated"), direction="greater",
        margin=-0.005, paired=True, paper="§4.6 (iii), the expected nuance",
        note="with every fact dropped the EVPV judge reads its own perception and no claim is contradicted, so "
             "they are equal by construction; the table's intermediate ratios show the path"))

for p_ext in ("0.0", "0.05"):
    CLAIMS.append(Claim(
        f"sanity p_perc 0 p_ext {p_ext}", f"With p_perc = 0 EVPV gives no gain: EVPV − plain step macro-F1 below the "
        f"3-point margin of (i), p_ext = {p_ext}", results=GRID,
        a=cell("0.0", p_ext, "step/evpv/macro_f1", "EVPV"), b=cell("0.0", p_ext, "step/plain/macro_f1", "plain"),
        direction="less", margin=0.03, paired=True, paper="§4.6 sanity row",
        note="without extractor noise both judges read the true question: no difference by construction"
             if p_ext == "0.0" else "extractor noise without perception noise can only cost the EVPV judge"))

# J-learn (spec §4.4): a trained judge instead of J-sim, experiments/evpv_prm/jlearn.py (p_perc 0.2, p_ext 0.05,
# 3 seeds; both judges of a seed share the problems, candidates and noise draws: paired by seed). Evaluated once
# results/jlearn is committed; until then each row names the command.
JLEARN = "projects/evpv_prm/results/jlearn"


def jlearn_run(results: str) -> str:
    """The command that writes a J-learn results folder (results/jlearn or results/jlearn_<variant>)."""
    variant = os.path.basename(results).removeprefix("jlearn").lstrip("_")
    config = "experiments/evpv_prm/jlearn.py" + (f":{variant}" if variant else "")
    return (f"needs one GPU (6 judge SFT stages + 3 evaluation points): python -m shared.sweep --config={config} "
            f"--workdir=runs/evpv_prm/{os.path.basename(results)} --parallel=6, then commit its results.{{csv,md}}, "
            f"plot and manifest to {results}")


JLEARN_LEARNED = (Level(0.5, 0.1, "chance", column="step/plain/macro_f1"),
                  Level(0.5, 0.1, "chance", column="step/evpv/macro_f1"))


# The :long variant: the same judges with 30k SFT steps (the committed ones underfit).
JLEARN_LONG = "projects/evpv_prm/results/jlearn_long"


# The :pairs variant: the same stages with half of each judge's SFT examples (premise-misread step, clean twin) pairs.
JLEARN_PAIRS = "projects/evpv_prm/results/jlearn_pairs"


def jlearn_claim(id: str, text: str, a: Arm, b: Arm, results: str = JLEARN, **kw) -> Claim:
    """A J-learn claim: evaluated when its results folder exists, else "not run yet" with the command."""
    if os.path.isdir(os.path.join(REPO, results)):
        return Claim(id, text, results=results, a=a, b=b, paired=True, levels=JLEARN_LEARNED, **kw)
    return Claim(id, text, paper=kw.get("paper", ""), not_run=jlearn_run(results))


def jlearn(column: str, label: str) -> Arm:
    return Arm({"arm": "jlearn"}, column, label)


CLAIMS.append(jlearn_claim(
    "(i) J-learn F1", "With a learned judge (4-layer d-256 transformer, SFT on templated problems): EVPV-conditioned "
    "step macro-F1 ≥ plain + 3 points, p_perc = 0.2, p_ext = 0.05", jlearn("step/evpv/macro_f1", "EVPV judge"),
    jlearn("step/plain/macro_f1", "plain judge"), direction="greater", margin=0.03,
    paper="§4.4 J-learn, criterion §4.6 (i)", note="inconclusive when a judge's macro-F1 sits at chance (it did not "
    "learn the checks)"))
CLAIMS.append(jlearn_claim(
    "(i) J-learn recall", "… driven by recall on premise-misread steps: EVPV recall > plain recall (learned judges, "
    "p_perc = 0.2, p_ext = 0.05)", jlearn("step/evpv/premise_recall", "EVPV judge"),
    jlearn("step/plain/premise_recall", "plain judge"), direction="greater", margin=0.0, paper="§4.4, §4.6 (i)"))
CLAIMS.append(jlearn_claim(
    "(ii) J-learn plain correctness_rate", "Gated BoN@8 > ungated BoN@8 by ≥ 2 points, correctness_rate, learned "
    "plain judge, p_perc = 0.2, p_ext = 0.05", jlearn("bon/plain/gated/correctness_rate@8", "gated"),
    jlearn("bon/plain/ungated/correctness_rate@8", "ungated"), direction="greater", margin=0.02,
    paper="§4.4, §4.6 (ii)", note="ties: any tied best candidate correct (the released script's rule)"))
CLAIMS.append(jlearn_claim(
    "(i) J-learn F1, pair data", "As (i) J-learn F1, with judges trained on half (premise-misread step, clean twin) "
    "pairs (`jlearn.py:pairs`)", jlearn("step/evpv/macro_f1", "EVPV judge"),
    jlearn("step/plain/macro_f1", "plain judge"), results=JLEARN_PAIRS, direction="greater", margin=0.03,
    paper="§4.4 J-learn, criterion §4.6 (i)", note="the judges' training data is ours (spec §6 item 5)"))
CLAIMS.append(jlearn_claim(
    "(i) J-learn recall, pair data", "As (i) J-learn recall, with the pair data", jlearn("step/evpv/premise_recall",
    "EVPV judge"), jlearn("step/plain/premise_recall", "plain judge"), results=JLEARN_PAIRS, direction="greater",
    margin=0.0, paper="§4.4, §4.6 (i)"))
CLAIMS.append(jlearn_claim(
    "(ii) J-learn plain correctness_rate, pair data", "As (ii) J-learn plain correctness_rate, with the pair data",
    jlearn("bon/plain/gated/correctness_rate@8", "gated"), jlearn("bon/plain/ungated/correctness_rate@8", "ungated"),
    results=JLEARN_PAIRS, direction="greater", margin=0.02, paper="§4.4, §4.6 (ii)",
    note="ties: any tied best candidate correct (the released script's rule)"))
CLAIMS.append(jlearn_claim(
    "(i) J-learn F1, long SFT", "As (i) J-learn F1, with judges trained 30k SFT steps (`jlearn.py:long`)",
    jlearn("step/evpv/macro_f1", "EVPV judge"), jlearn("step/plain/macro_f1", "plain judge"), results=JLEARN_LONG,
    direction="greater", margin=0.03, paper="§4.4 J-learn, criterion §4.6 (i)"))
CLAIMS.append(jlearn_claim(
    "(i) J-learn recall, long SFT", "As (i) J-learn recall, with judges trained 30k SFT steps",
    jlearn("step/evpv/premise_recall", "EVPV judge"), jlearn("step/plain/premise_recall", "plain judge"),
    results=JLEARN_LONG, direction="greater", margin=0.0, paper="§4.4, §4.6 (i)"))
CLAIMS.append(jlearn_claim(
    "(ii) J-learn plain correctness_rate, long SFT", "As (ii) J-learn plain correctness_rate, with judges trained "
    "30k SFT steps", jlearn("bon/plain/gated/correctness_rate@8", "gated"),
    jlearn("bon/plain/ungated/correctness_rate@8", "ungated"), results=JLEARN_LONG, direction="greater", margin=0.02,
    paper="§4.4, §4.6 (ii)", note="ties: any tied best candidate correct (the released script's rule)"))
