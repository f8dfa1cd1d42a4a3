"""The claims of the dir_debias ledger (spec section 4.5; 3 seeds per point), as data for
`python -m shared.stats.ledger --project dir_debias`, which writes the README's ledger table and
results/ledger.json.

The per-seed values are the `per_seed/<key>` lists of results/small_scale/manifest.json, copied unchanged by
`python -m projects.dir_debias.per_seed projects/dir_debias/results/small_scale` into per_seed_{d1,nl,hh}.csv.
Every point trains its seeds from scratch (no shared initialisation), so differences between points are Welch
intervals; a difference within one point (aligned − anti accuracy, probe − majority) is paired by seed.

The setup condition of every DIR-versus-BT claim: an RM that sits at chance on the balanced split (within 0.03 of
0.5) has learnt nothing but the shortcut (BT) or has collapsed (DIR at large gamma), so no debiasing "at little
cost" can show: those claims are inconclusive while it holds.
"""
from shared.stats.claims import Arm, Claim, Level

R = "projects/dir_debias/results/small_scale"
D1, NL, HH = "per_seed_d1.csv", "per_seed_nl.csv", "per_seed_hh.csv"
ALIGNED, ANTI, BALANCED = "eval/aligned/accuracy", "eval/anti/accuracy", "eval/balanced/accuracy"
GAP, SPEARMAN = "eval/bias_gap", "eval/balanced/spearman_dr_dv"
PROBE, MAJORITY = "probe/linear_acc", "probe/majority"


def point(name: str, value: str, abs: bool = False) -> Arm:
    return Arm({"point": name}, value, name, abs=abs)


def balanced_at_chance(bt: str) -> tuple[Level, ...]:
    """The BT baseline's balanced accuracy at chance, and either arm's (DIR collapsed)."""
    return (Level(0.5, 0.03, "chance", arm=point(bt, BALANCED)), Level(0.5, 0.03, "chance", column=BALANCED))


def welch(cid, text, table, a, b, direction, margin=0.0, levels=(), paper="criterion as stated", note=""):
    return Claim(cid, text, results=R, table=table, a=a, b=b, direction=direction, margin=margin, paired=False,
                 levels=levels, paper=paper, note=note)


def within(cid, text, table, a, b, direction, margin=0.0, levels=(), paper="criterion as stated", note=""):
    return Claim(cid, text, results=R, table=table, a=a, b=b, direction=direction, margin=margin, paired=True,
                 levels=levels, paper=paper, note=note)


D1_SETUP = balanced_at_chance("d1_bt")
HH_SETUP = balanced_at_chance("hh_bt")
CLAIMS = [
    within("1", "BT learns the length shortcut on D1: bias gap (aligned − anti accuracy) ≥ 15 points", D1,
           point("d1_bt", ALIGNED), point("d1_bt", ANTI), "greater", 0.15, paper="bias gap ≥ 15 points"),
]
for g in ("0.1", "1"):
    dir_ = f"d1_dir_g{g}"
    CLAIMS += [
        welch(f"2 (gap, γ {g})", f"DIR γ {g} cuts the D1 bias gap by ≥ 50%: |gap| ≤ 0.5 × BT's", D1,
              point(dir_, GAP, abs=True), 0.5 * point("d1_bt", GAP, abs=True), "less", levels=D1_SETUP),
        welch(f"2 (anti, γ {g})", f"DIR γ {g} raises D1 anti-split accuracy by ≥ 10 points over BT", D1,
              point(dir_, ANTI), point("d1_bt", ANTI), "greater", 0.10, levels=D1_SETUP),
        welch(f"2 (balanced, γ {g})", f"DIR γ {g}'s D1 balanced accuracy no more than 1 point below BT's", D1,
              point(dir_, BALANCED), point("d1_bt", BALANCED), "greater", -0.01, levels=D1_SETUP),
        welch(f"2 (aligned, γ {g})", f"DIR γ {g}'s D1 aligned accuracy no more than 3 points below BT's", D1,
              point(dir_, ALIGNED), point("d1_bt", ALIGNED), "greater", -0.03, levels=D1_SETUP),
    ]
for g in ("0.1", "1"):
    dir_ = f"d1_dir_g{g}"
    CLAIMS += [
        welch(f"3 (Spearman, γ {g})", f"DIR γ {g} cuts |Spearman(Δr, Δlen)| by ≥ 50% of BT's on D1", D1,
              point(dir_, SPEARMAN, abs=True), 0.5 * point("d1_bt", SPEARMAN, abs=True), "less",
              levels=D1_SETUP),
        within(f"3 (probe, γ {g})", f"A probe reads the attribute from DIR γ {g}'s z within 5 points of the "
               "majority rate (D1)", D1, point(dir_, PROBE), point(dir_, MAJORITY), "less", 0.05,
               levels=D1_SETUP),
    ]
CLAIMS += [
    within("3 (probe, BT)", "A probe reads the attribute from BT's z ≥ 15 points above the majority rate (D1)", D1,
           point("d1_bt", PROBE), point("d1_bt", MAJORITY), "greater", 0.15),
    welch("4", "D1-NL: DIR's anti-split accuracy ≥ 5 points above the Pearson penalty's", NL,
          point("nl_dir_g1", ANTI), point("nl_pearson", ANTI), "greater", 0.05,
          levels=(Level(0.5, 0.03, "chance"),), paper="≥ 5 points",
          note="DIR beats the Pearson penalty only because the Pearson RM sits below chance"),
]
for g in ("0.1", "1"):
    dir_ = f"d1_dir_g{g}"
    CLAIMS += [
        welch(f"5 (quality, γ {g})", f"Best-of-16 with DIR γ {g} picks higher oracle quality than with BT", D1,
              point(dir_, "bon/quality"), point("d1_bt", "bon/quality"), "greater",
              levels=D1_SETUP + (Level(1.2303, 0.1, "chance"),), paper="higher quality",
              note="chance here is the quality of a random pick (`bon/quality_random`)"),
        welch(f"5 (filler, γ {g})", f"Best-of-16 with DIR γ {g} picks fewer filler tokens than with BT", D1,
              point(dir_, "bon/filler"), point("d1_bt", "bon/filler"), "less", levels=D1_SETUP,
              paper="fewer fillers"),
    ]
CLAIMS += [
    welch("6", "γ trade-off: too large γ (10) lowers D1 balanced accuracy below BT's", D1,
          point("d1_dir_g10", BALANCED), point("d1_bt", BALANCED), "less", levels=D1_SETUP,
          paper="monotone trade-off"),
    within("7 (1)", "D2 (HH harmless + injected closers): BT learns the closer shortcut (bias gap > 0)", HH,
           point("hh_bt", ALIGNED), point("hh_bt", ANTI), "greater", paper="same direction as 1, smaller"),
    welch("7 (2, gap)", "D2: DIR γ 1 lowers |bias gap| below BT's", HH, point("hh_dir_g1", GAP, abs=True),
          point("hh_bt", GAP, abs=True), "less", levels=HH_SETUP, paper="same direction as 2, smaller"),
    welch("7 (2, anti)", "D2: DIR γ 1 raises anti-split accuracy over BT", HH, point("hh_dir_g1", ANTI),
          point("hh_bt", ANTI), "greater", levels=HH_SETUP, paper="same direction as 2, smaller"),
    welch("7 (2, balanced)", "D2: DIR γ 1's balanced accuracy no more than 1 point below BT's", HH,
          point("hh_dir_g1", BALANCED), point("hh_bt", BALANCED), "greater", -0.01, levels=HH_SETUP,
          paper="as 2"),
    welch("7 (2, aligned)", "D2: DIR γ 1's aligned accuracy no more than 3 points below BT's", HH,
          point("hh_dir_g1", ALIGNED), point("hh_bt", ALIGNED), "greater", -0.03, levels=HH_SETUP, paper="as 2"),
    welch("7 (3, Spearman)", "D2: DIR γ 1 lowers |Spearman(Δr, Δlen)| below BT's", HH,
          point("hh_dir_g1", SPEARMAN, abs=True), point("hh_bt", SPEARMAN, abs=True), "less", levels=HH_SETUP,
          paper="same direction as 3, smaller"),
    within("7 (3, probe)", "D2: a probe reads the attribute from DIR γ 1's z within 5 points of the majority rate",
           HH, point("hh_dir_g1", PROBE), point("hh_dir_g1", MAJORITY), "less", 0.05, levels=HH_SETUP,
           paper="as 3"),
    Claim("8", "Paper setting: Llama-3.1-8B RM on Skywork-80K, RM-Bench / RewardBench",
          paper="not retrieved (spec section 3)", not_run="no weights or data offline"),
]
