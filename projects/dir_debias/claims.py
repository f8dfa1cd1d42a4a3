"""The claims of the dir_debias ledger (spec section 4.5), as data for
`python -m shared.stats.ledger --project dir_debias`, which writes the README's ledger table and
results/ledger.json.

Table: results/small_scale_spec (`experiments/dir_debias/small_scale.py:spec`), one sweep point per arm and seed.
Every arm of a seed continues from that seed's BT warm start (stage warm_<setting>_s<k>), so differences between
arms are paired by seed; D1 has 5 seeds, D1-NL and D2 3.

Gammas: the spec's claim 2 takes the best gamma of {0.1, 1}; both are rows here (D1 also runs 0.2 / 0.3 / 0.5, shown
in the README's table, not claimed). D1-NL and D2 run gamma 0.2 and 0.5 (gamma 1 collapsed the legacy RMs to
chance), so claims 4 and 7 read those two. Claim 6's "too large gamma" is the largest gamma run, 1.

Setup conditions: on D1 an RM within 0.03 of 0.5 balanced accuracy has learnt nothing but the shortcut (BT) or has
collapsed (DIR), so the D1 DIR-versus-BT claims are inconclusive while it holds. On D2 the spec expects
true-preference accuracy near chance for a from-scratch RM ("the measurable quantity is bias reliance"), so only the
D2 claim about balanced accuracy itself carries that condition; the bias-reliance claims (gap, anti, Spearman,
probe) do not.
"""
from shared.stats.claims import Arm, Claim, Level

R = "projects/dir_debias/results/small_scale_spec"
ALIGNED, ANTI, BALANCED = "eval/aligned/accuracy", "eval/anti/accuracy", "eval/balanced/accuracy"
GAP, SPEARMAN = "eval/bias_gap", "eval/balanced/spearman_dr_dv"
PROBE, MAJORITY = "probe/linear_acc", "probe/majority"


def arm(name: str, value: str, abs: bool = False) -> Arm:
    return Arm({"arm": name}, value, name, abs=abs)


def balanced_at_chance(bt: str) -> tuple[Level, ...]:
    """The BT baseline's balanced accuracy at chance, and either arm's (DIR collapsed)."""
    return (Level(0.5, 0.03, "chance", arm=arm(bt, BALANCED)), Level(0.5, 0.03, "chance", column=BALANCED))


def paired(cid, text, a, b, direction, margin=0.0, levels=(), paper="criterion as stated", note=""):
    return Claim(cid, text, results=R, a=a, b=b, direction=direction, margin=margin, paired=True, levels=levels,
                 paper=paper, note=note)


D1_SETUP = balanced_at_chance("d1_bt")
CLAIMS = [
    paired("1", "BT learns the length shortcut on D1: bias gap (aligned − anti accuracy) ≥ 15 points",
           arm("d1_bt", ALIGNED), arm("d1_bt", ANTI), "greater", 0.15, paper="bias gap ≥ 15 points"),
]
for g in ("0.1", "1"):
    dir_ = f"d1_dir_g{g}"
    CLAIMS += [
        paired(f"2 (gap, γ {g})", f"DIR γ {g} cuts the D1 bias gap by ≥ 50%: |gap| ≤ 0.5 × BT's",
               arm(dir_, GAP, abs=True), 0.5 * arm("d1_bt", GAP, abs=True), "less", levels=D1_SETUP),
        paired(f"2 (anti, γ {g})", f"DIR γ {g} raises D1 anti-split accuracy by ≥ 10 points over BT",
               arm(dir_, ANTI), arm("d1_bt", ANTI), "greater", 0.10, levels=D1_SETUP),
        paired(f"2 (balanced, γ {g})", f"DIR γ {g}'s D1 balanced accuracy no more than 1 point below BT's",
               arm(dir_, BALANCED), arm("d1_bt", BALANCED), "greater", -0.01, levels=D1_SETUP),
        paired(f"2 (aligned, γ {g})", f"DIR γ {g}'s D1 aligned accuracy no more than 3 points below BT's",
               arm(dir_, ALIGNED), arm("d1_bt", ALIGNED), "greater", -0.03, levels=D1_SETUP),
    ]
for g in ("0.1", "1"):
    dir_ = f"d1_dir_g{g}"
    CLAIMS += [
        paired(f"3 (Spearman, γ {g})", f"DIR γ {g} cuts |Spearman(Δr, Δlen)| by ≥ 50% of BT's on D1",
               arm(dir_, SPEARMAN, abs=True), 0.5 * arm("d1_bt", SPEARMAN, abs=True), "less", levels=D1_SETUP),
        paired(f"3 (probe, γ {g})", f"A probe reads the attribute from DIR γ {g}'s z within 5 points of the "
               "majority rate (D1)", arm(dir_, PROBE), arm(dir_, MAJORITY), "less", 0.05, levels=D1_SETUP),
    ]
CLAIMS += [
    paired("3 (probe, BT)", "A probe reads the attribute from BT's z ≥ 15 points above the majority rate (D1)",
           arm("d1_bt", PROBE), arm("d1_bt", MAJORITY), "greater", 0.15),
]
for g in ("0.2", "0.5"):
    CLAIMS.append(paired(f"4 (γ {g})", f"D1-NL: DIR γ {g}'s anti-split accuracy ≥ 5 points above the Pearson "
                         "penalty's", arm(f"nl_dir_g{g}", ANTI), arm("nl_pearson", ANTI), "greater", 0.05,
                         levels=(Level(0.5, 0.03, "chance", column=BALANCED),), paper="≥ 5 points"))
for g in ("0.1", "1"):
    dir_ = f"d1_dir_g{g}"
    CLAIMS += [
        paired(f"5 (quality, γ {g})", f"Best-of-16 with DIR γ {g} picks higher oracle quality than with BT",
               arm(dir_, "bon/quality"), arm("d1_bt", "bon/quality"), "greater",
               levels=D1_SETUP + (Level(1.2303, 0.1, "chance"),), paper="higher quality",
               note="chance here is the quality of a random pick (`bon/quality_random`)"),
        paired(f"5 (filler, γ {g})", f"Best-of-16 with DIR γ {g} picks fewer filler tokens than with BT",
               arm(dir_, "bon/filler"), arm("d1_bt", "bon/filler"), "less", levels=D1_SETUP,
               paper="fewer fillers"),
    ]
CLAIMS += [
    paired("6", "γ trade-off: too large γ (1, the largest run) lowers D1 balanced accuracy below BT's",
           arm("d1_dir_g1", BALANCED), arm("d1_bt", BALANCED), "less",
           levels=(Level(0.5, 0.03, "chance", arm=arm("d1_bt", BALANCED)),), paper="monotone trade-off",
           note="the large-γ arm at chance is the trade-off itself, so only BT's level is a setup condition"),
    paired("7 (1)", "D2 (HH harmless + injected closers): BT learns the closer shortcut (bias gap > 0)",
           arm("hh_bt", ALIGNED), arm("hh_bt", ANTI), "greater", paper="same direction as 1, smaller"),
]
for g in ("0.2", "0.5"):
    dir_ = f"hh_dir_g{g}"
    CLAIMS += [
        paired(f"7 (2, gap, γ {g})", f"D2: DIR γ {g} lowers |bias gap| below BT's", arm(dir_, GAP, abs=True),
               arm("hh_bt", GAP, abs=True), "less", paper="same direction as 2, smaller"),
        paired(f"7 (2, anti, γ {g})", f"D2: DIR γ {g} raises anti-split accuracy over BT", arm(dir_, ANTI),
               arm("hh_bt", ANTI), "greater", paper="same direction as 2, smaller"),
        paired(f"7 (2, balanced, γ {g})", f"D2: DIR γ {g}'s balanced accuracy no more than 1 point below BT's",
               arm(dir_, BALANCED), arm("hh_bt", BALANCED), "greater", -0.01,
               levels=balanced_at_chance("hh_bt"), paper="as 2"),
        paired(f"7 (3, Spearman, γ {g})", f"D2: DIR γ {g} lowers |Spearman(Δr, Δlen)| below BT's",
               arm(dir_, SPEARMAN, abs=True), arm("hh_bt", SPEARMAN, abs=True), "less",
               paper="same direction as 3, smaller"),
        paired(f"7 (3, probe, γ {g})", f"D2: a probe reads the attribute from DIR γ {g}'s z within 5 points of "
               "the majority rate", arm(dir_, PROBE), arm(dir_, MAJORITY), "less", 0.05, paper="as 3"),
    ]
CLAIMS += [
    Claim("8", "Paper setting: Llama-3.1-8B RM on Skywork-80K, RM-Bench / RewardBench",
          paper="not retrieved (spec section 3)", not_run="no weights or data offline"),
]
