"""The claims of the mode-balanced ledger (criteria D.3 of ../shared/papers/mode_balanced.md), as data for
`python -m shared.stats.ledger --project mode_balanced`, which writes the README's ledger table and
results/ledger.json.

Every claim reads experiments/mode_balanced/table.py (default: outcome GRPO with a format gate), committed under
results/table/ once run; claims 1-3 read the :min table (results/min: their arms only) while that one is not
committed; until then each is "not run yet". Every arm of a seed starts from that seed's teacher warm
start, so differences are paired by seed. Claim 2 says "some lambda in (0, 1)": it is tested at lambda = 0.1, chosen
before any run (the middle of the spec's grid); picking the best lambda after the run would need a correction for
the four candidates. "Keeps >= 70% of the RL gain on the head slice" is linear in the arms:
lam0.1 - sft >= 0.7 (lam0 - sft), i.e. lam0.1 - 0.7 lam0 - 0.3 sft > 0.
"""
from shared.stats.claims import Arm, Claim

RESULTS = "projects/mode_balanced/results/table"
MIN_RESULTS = "projects/mode_balanced/results/min"     # claims 1-3 read it while the full table is not committed
TABLE = ("`python -m shared.sweep --config=experiments/mode_balanced/table.py --workdir=runs/mode_balanced/table "
         "--parallel=8` (one H100 or more; see README.md \"Cost\")")
# claims 1-3 read only sft, lam0, lam0.1, lam1: the :min table runs just those (campaign row mode_balanced_min)
MIN_TABLE = ("`python -m shared.sweep --config=experiments/mode_balanced/table.py:min --workdir=runs/mode_balanced/min "
             "--parallel=6 --stages_at_once=1` (or the full table)")
HEAD, TAIL, F1 = "mb/head/accuracy", "mb/tail/accuracy", "mb/overall/macro_f1"
COLLAPSE = "mb/tail/head_label_on_tail"
FIRST_TOKEN = "eval/greedy_accuracy"     # the students' greedy first-character accuracy on the overall test split


def arm(name: str, value: str) -> Arm:
    return Arm({"arm": name}, value, name)


def claim(cid, text, a, b, direction, margin=0.0, paper="", note="", arms=""):
    results, table = ([RESULTS], TABLE) if cid.startswith("4") else ([RESULTS, MIN_RESULTS], MIN_TABLE)
    return Claim.once_run(cid, text, results=results, a=a, b=b, direction=direction, margin=margin, paired=True,
                          paper=paper, note=note, not_run=f"arms {arms} of {table}")


CLAIMS = [
    claim("1 (head)", "Plain RL (λ = 0) raises head-slice accuracy over SFT", arm("lam0", HEAD), arm("sft", HEAD),
          "greater", paper="D.3.1 (RL improves the majority behaviour)", arms="sft, lam0"),
    claim("1 (long tail)", "Plain RL (λ = 0) lowers long-tail accuracy by ≥ 5 points", arm("lam0", TAIL),
          arm("sft", TAIL), "less", margin=-0.05, paper="D.3.1 (mode collapse)", arms="sft, lam0"),
    claim("1 (head label)", "Plain RL answers long-tail inputs with the head-rule label more often than SFT",
          arm("lam0", COLLAPSE), arm("sft", COLLAPSE), "greater", paper="D.3.1 (the collapse indicator)",
          arms="sft, lam0"),
    claim("2 (long tail)", "λ = 0.1 keeps long-tail accuracy within 1 point of SFT", arm("lam0.1", TAIL),
          arm("sft", TAIL), "greater", margin=-0.01, paper="D.3.2", arms="sft, lam0.1"),
    claim("2 (head gain)", "λ = 0.1 keeps ≥ 70% of plain RL's head-slice gain",
          arm("lam0.1", HEAD) - 0.7 * arm("lam0", HEAD), 0.3 * arm("sft", HEAD), "greater", paper="D.3.2",
          arms="sft, lam0, lam0.1"),
    claim("2 (macro-F1)", "λ = 0.1 beats plain RL on overall macro-F1", arm("lam0.1", F1), arm("lam0", F1), "greater",
          paper="D.3.2 (best macro-F1, CI excluding the λ = 0 arm)", arms="lam0, lam0.1"),
    claim("3 (≥ SFT − 1)", "λ = 1 stays above SFT − 1 point on overall macro-F1", arm("lam1", F1), arm("sft", F1),
          "greater", margin=-0.01, paper="D.3.3 (large λ converges to SFT)", arms="sft, lam1"),
    claim("3 (≤ SFT + 1)", "λ = 1 stays below SFT + 1 point on overall macro-F1", arm("lam1", F1), arm("sft", F1),
          "less", margin=0.01, paper="D.3.3 (large λ converges to SFT)", arms="sft, lam1"),
    claim("4", "The student distilled from answer-first traces beats the label-only student on first-token accuracy",
          arm("student_afrl", FIRST_TOKEN), arm("student_label", FIRST_TOKEN), "greater",
          paper="D.3.4 (secondary; the paper: a 0.6B student keeps most of the 32B teacher's logic)",
          arms="student_afrl, student_label"),
]
