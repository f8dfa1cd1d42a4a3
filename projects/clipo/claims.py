"""The claims of the CLIPO ledger (criteria D.4), as data for `python -m shared.stats.ledger --project clipo`, which
writes the README's ledger table and results/ledger.json.

The rows come from the first committed of: results/spec_table (the D.3-scale re-run, 4 arms x 5 seeds from a
shared SFT stage per seed: paired by seed), results/spec_min (its GRPO and CLIPO arms only, for claims 1-4), and
the legacy results/tinygsm_sym_table (command [C1] of the README; each point ran its own SFT warm start, so its
intervals are Welch's). Arms are `clipo.mode`: `off` = GRPO, `trained` = CLIPO, `fixed`, `shuffled`. Accuracies are fractions, so D.4's "1 point" is 0.01. Sym and P2 greedy accuracy sit
at the floor (0) in every arm: claims that average over them or read P2 are inconclusive while they do.
"""
import os

from shared.stats.claims import REPO_ROOT, Arm, Claim, Level

SPEC, SPEC_MIN, LEGACY = (f"projects/clipo/results/{t}" for t in ("spec_table", "spec_min", "tinygsm_sym_table"))


def first_committed(*folders: str) -> str:
    """The first folder holding a manifest.json (shared.sweep wrote it); the legacy table always does."""
    return next(f for f in folders if os.path.isfile(os.path.join(REPO_ROOT, f, "manifest.json")))


R = first_committed(SPEC, SPEC_MIN, LEGACY)           # claims 1-4: GRPO vs CLIPO
R_ALL = first_committed(SPEC, LEGACY)                 # S1: the fixed / shuffled arms too


def legacy_note(text: str, results: str = R) -> str:
    """A note about the legacy table's rows (its per-point warm starts, its floor sets), kept only while it is read."""
    return text if results == LEGACY else ""
MODES = {"off": "GRPO", "trained": "CLIPO", "fixed": "CLIPO-fixed", "shuffled": "CLIPO-shuffled"}


def mode(name: str, value: str) -> Arm:
    return Arm({"clipo.mode": name}, value, MODES[name])


FLOOR_SETS = (Level(0.0, 0.01, "floor", column="tgs/sym_greedy"), Level(0.0, 0.02, "floor", column="tgs/p2_greedy"))
P2_FLOOR = (Level(0.0, 0.02, "floor", column="tgs/p2_greedy"),)
NO_WEIGHTS = "no weights offline"


def welch(cid, text, value, direction, margin=0.0, levels=(), a="trained", b="off", paper="", note=""):
    return Claim(cid, text, results=R, a=mode(a, value), b=mode(b, value), direction=direction, margin=margin,
                 paired=R != LEGACY, levels=levels, paper=paper, note=note)


def p2_minus_id(name: str) -> Arm:
    return mode(name, "tgs/p2_greedy") - mode(name, "tgs/id_greedy")


def recovers_less_than_half(name: str) -> Claim:
    # (X - GRPO) < 0.5 (CLIPO - GRPO)  <=>  X - (0.5 CLIPO + 0.5 GRPO) < 0
    value = "tgs/robust_greedy"
    return Claim(f"S1 ({MODES[name]})", f"{MODES[name]} recovers < ½ of CLIPO's gain in mean robust accuracy",
                 results=R_ALL, a=mode(name, value), b=0.5 * mode("trained", value) + 0.5 * mode("off", value),
                 direction="less", paired=R_ALL != LEGACY, levels=FLOOR_SETS,
                 paper="CLIPO-fixed −0.77 (Track I) / −0.97 (Track II) below CLIPO (S)",
                 note=legacy_note("CLIPO's own gain sits on floor sets (claim 1), so there is no gain to recover",
                                  R_ALL))


CLAIMS = [
    welch("1", "Mean greedy accuracy over {Sym, P1, P2, NoOp} improves by ≥ 1.0 point", "tgs/robust_greedy",
          "greater", 0.01, FLOOR_SETS, paper="+1.12 average over 8 sets (Track I, (S))",
          note=legacy_note("the composite is three quarters floor sets")),
    welch("1 (avg@8)", "The same, read as avg@8 over {Sym, P1, P2, NoOp}", "tgs/robust_avg@8", "greater", 0.01,
          FLOOR_SETS, paper="+1.12 average over 8 sets (Track I, (S))"),
    welch("2", "ID greedy accuracy within −0.5 points of GRPO or better", "tgs/id_greedy", "greater", -0.005,
          paper="not reported separately",
          note=legacy_note("the warm starts already differ between arms (`tgs/id_greedy_before`)")),
    Claim("3", "The gain on P2 exceeds the gain on ID: (P2 − ID) of CLIPO > (P2 − ID) of GRPO", results=R,
          a=p2_minus_id("trained"), b=p2_minus_id("off"), direction="greater", paired=R != LEGACY, levels=P2_FLOOR,
          paper="GSM8K-P2 +3.36 vs average +1.12 (S)"),
    welch("4 (ID PW-rate)", "PW-rate on ID is lower for CLIPO than GRPO", "tgs/id_pw_rate", "less",
          paper="not reported (our diagnostic)"),
    welch("4 (ID copy rate)", "Copy rate on leak items is lower for CLIPO than GRPO", "tgs/id_leak_copy_rate",
          "less", paper="not reported (our diagnostic)"),
    welch("4 (NoLeak copy rate)", "Copy rate on NoLeak items is lower for CLIPO than GRPO",
          "tgs/noleak_copy_rate", "less", levels=(Level(0.0, 0.02, "floor"),),
          paper="not reported (our diagnostic)"),
    welch("4 (P2 PW-rate)", "PW-rate on P2 is lower for CLIPO than GRPO", "tgs/p2_pw_rate", "less", levels=P2_FLOOR,
          paper="not reported (our diagnostic)", note="the rate is over the few correct P2 answers of a point"),
    recovers_less_than_half("fixed"),
    recovers_less_than_half("shuffled"),
    Claim("S2", "τ = 0.05 beats τ = 0.2", paper="low τ (0.02, 0.05) best (S)",
          not_run="no τ sweep point in `experiments/clipo/tinygsm_sym_table.py`"),
    Claim("S3", "Larger G (8 → 16 → 32) increases the gain", paper="larger G helps (S)",
          not_run="no G sweep point in `experiments/clipo/tinygsm_sym_table.py`"),
    Claim("T1", "Track I: GRPO + CLIPO on GSM8K, Qwen2.5-3B", paper="63.26 average over 8 sets, +1.12 (S)",
          not_run=NO_WEIGHTS),
    Claim("T2", "Track II: CLIPO over GRPO / GSPO / DAPO / GMPO on MATH, Qwen2.5-7B",
          paper="+1.35 / +0.80 / +1.20 / +0.83; DAPO + CLIPO 44.05 (S)", not_run=NO_WEIGHTS),
]
