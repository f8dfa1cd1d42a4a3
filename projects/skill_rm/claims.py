"""The claims of the Skill-RM ledger (spec ../shared/papers/skill_rm.md section 4, "Reproduced if"), as data for
`python -m shared.stats.ledger --project skill_rm`, which writes the README's ledger table and results/ledger.json.

One table (results/heterojudge): every judge of a seed is scored on the same evaluation cases with the same
evidence, so the differences are paired by seed (each point is one seed; the arms are its columns). "skill >= X"
is read as non-inferiority by one point (margin -0.01); "within 2 points of the best single evidence" is margin
-0.02; "lower average cost than calling everything" is a plain superiority claim on cost (less, margin 0).
best_single/* is, per seed, the best of the five single-evidence judges on the evaluation split (the strictest
single-evidence comparator: chosen after seeing the evaluation data).
"""
from shared.stats.claims import Arm, Claim

RESULTS = "projects/skill_rm/results/heterojudge"
NO_PRICE = "projects/skill_rm/results/heterojudge_lam0"
RUN = ("`python -m shared.sweep --config=experiments/skill_rm/heterojudge.py --workdir=runs/skill_rm/heterojudge "
       "--parallel=3` (CPU, about 1 min per seed)")
PAPER = "no number for this analog (paper numbers not retrieved)"


def col(value: str, label: str) -> Arm:
    return Arm({"arm": "heterojudge"}, value, label)


def claim(cid, text, a, b, direction="greater", margin=-0.01, note=""):
    return Claim(cid, text, results=RESULTS, a=a, b=b, direction=direction, margin=margin, paired=True,
                 paper=PAPER, note=note)


SKILL = col("skill/accuracy", "skill")
CLAIMS = [
    claim("1 (vs flat)", "Skill-RM's evidence selection is at least as accurate as the flat judge that takes all "
          "evidence at once (mixture accuracy, within 1 point)", SKILL, col("flat/accuracy", "flat")),
    claim("2 (vs single evidence)", "… and at least as accurate as every single-evidence judge (the best of them "
          "per seed, within 1 point)", SKILL, col("best_single/accuracy", "best single evidence")),
]
DECISIVE = ("the family has exact evidence (the {what}), so the best single evidence is right on every pair: the "
            "claim tests that the controller routes to it")
NOTES = {"gsm8k": DECISIVE.format(what="reference answer"), "if": DECISIVE.format(what="mounted checkers"),
         "hh": "the two tiny RMs are the only evidence; best single evidence is picked per seed on the evaluation "
               "split"}
for family, name in (("gsm8k", "GSM8K answer pairs"), ("if", "instruction-following pairs"),
                     ("hh", "HH harmless pairs")):
    CLAIMS.append(claim(f"3 ({family})", f"Per family, within 2 points of the best single evidence: {name}",
                        col(f"skill/{family}/accuracy", "skill"),
                        col(f"best_single/{family}/accuracy", "best single evidence"), margin=-0.02,
                        note=NOTES[family]))
CLAIMS.append(claim("4 (cost)", "… at a lower average evidence cost than calling everything",
                    col("skill/cost", "skill cost"), col("call_all/cost", "call everything cost"),
                    direction="less", margin=0.0))
CLAIMS.append(Claim(
    "5 (price, check)", "The price on evidence is what lowers the cost: the controller trained at lambda 0.03 spends "
    "less than one trained at lambda 0 (a check of our setup, not a paper claim)", results=RESULTS,
    a=col("skill/cost", "skill cost, lambda 0.03"),
    b=Arm({"arm": "heterojudge"}, "skill/cost", "skill cost, lambda 0", results=NO_PRICE),
    direction="less", margin=0.0, paired=False, paper="mechanism (no number)",
    note="results/heterojudge_lam0: the same seeds and data with cost_lambda 0; Welch's t across the two tables"))
