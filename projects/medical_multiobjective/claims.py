"""The claims of the medical_multiobjective ledger (criteria D.3 of ../shared/papers/medical_multiobjective.md), as
data for `python -m shared.stats.ledger --project medical_multiobjective`.

All rows come from results/table (experiments/medical_multiobjective/table.py: 8 arms x 3 seeds). Every arm of a
seed starts from that seed's SFT stage, so differences are paired by seed, and "below / at least SFT" compares an
arm's held-out metric after RL with the same run's "_before" value (the warm start). Rates are fractions: "5 points"
is 0.05, "more than 1 point" 0.01. The channels of "every channel ≥ SFT" and "no channel drops" are accuracy,
hazard refusal, over-refusal (lower is better) and format; "≥ SFT" is read as non-inferiority within 1 point. The
gradient share is the combiner's proxy: the channel's share of the within-group variance of the combined reward
(mo/<channel>/share_mean, averaged over steps). "Removing weakness removes most of (2)" is: the no-weakness arm
keeps less than half of Tri-Factor's gain over RFN-only, no_weakness − (0.5 rfn_tri + 0.5 rfn) < 0.

A claim reads its table once the folder holds a committed manifest; until then it is "not run yet". Criteria 1 and
2 read only raw sum, RFN only and RFN + Tri-Factor, so they read the ":min" table (results/table_min: those three
arms) while the full table is not committed.
"""

from shared.stats.claims import Arm, Claim

RESULTS = "projects/medical_multiobjective/results/table"
COMMAND = ("`python -m shared.sweep --config=experiments/medical_multiobjective/table.py "
           "--workdir=runs/medical_multiobjective/table --parallel=8` (then commit its results to " + RESULTS + ")")
MIN_RESULTS = RESULTS + "_min"
MIN_COMMAND = ("`python -m shared.sweep --config=experiments/medical_multiobjective/table.py:min "
               "--workdir=runs/medical_multiobjective/table_min --parallel=8 --stages_at_once=1` (then commit its "
               "results to " + MIN_RESULTS + ")")
MIN_CRITERIA = ("1", "2")     # the criteria whose arms (raw_sum, rfn, rfn_tri) the :min table runs
NAMES = {"raw_sum": "raw sum", "zscore": "per-batch z-norm", "rfn": "RFN only", "rfn_tri": "RFN + Tri-Factor",
         "tri_no_weakness": "Tri-Factor − weakness", "tri_no_risk": "Tri-Factor − risk",
         "tri_no_redundancy": "Tri-Factor − redundancy", "nts": "normalise-then-sum"}
HIGHER = {"accuracy": "accuracy", "hazard_refusal": "hazard refusal", "format": "format rate"}


def arm(name: str, value: str) -> Arm:
    return Arm({"arm": name}, value, NAMES[name])


def claim(cid, text, a, b, direction, margin=0.0, paper="", note="") -> Claim:
    results, command = [RESULTS], COMMAND
    if cid.split(" ")[0] in MIN_CRITERIA:   # the full table once committed, else the :min one
        results, command = [RESULTS, MIN_RESULTS], MIN_COMMAND
    return Claim.once_run(cid, text, results=results, a=a, b=b, direction=direction, margin=margin, paired=True,
                          paper=paper, note=note, not_run=command)


def not_below_sft(cid: str, name: str) -> list[Claim]:
    """Every channel of `name` at least SFT's, within 1 point (over-refusal: at most SFT's + 1 point)."""
    out = [claim(f"{cid} ({label})", f"{NAMES[name]} keeps {label} ≥ SFT (within 1 point)", arm(name, f"mo/{key}"),
                 arm(name, f"mo/{key}_before"), "greater", -0.01, paper="criterion D.3")
           for key, label in HIGHER.items()]
    out.append(claim(f"{cid} (over-refusal)", f"{NAMES[name]} keeps over-refusal ≤ SFT's (within 1 point)",
                     arm(name, "mo/over_refusal"), arm(name, "mo/over_refusal_before"), "less", 0.01,
                     paper="criterion D.3"))
    return out


def no_drop_vs_rfn(cid: str) -> list[Claim]:
    """No channel of RFN + Tri-Factor drops by more than 1 point against RFN-only."""
    out = [claim(f"{cid} ({label})", f"RFN + Tri-Factor's {label} is within 1 point of RFN-only's or better",
                 arm("rfn_tri", f"mo/{key}"), arm("rfn", f"mo/{key}"), "greater", -0.01, paper="criterion D.3.2")
           for key, label in HIGHER.items() if key != "hazard_refusal"]
    out.append(claim(f"{cid} (over-refusal)", "RFN + Tri-Factor's over-refusal is within 1 point of RFN-only's or "
                     "lower", arm("rfn_tri", "mo/over_refusal"), arm("rfn", "mo/over_refusal"), "less", 0.01,
                     paper="criterion D.3.2"))
    return out


HAZARD = "mo/hazard_refusal"
def build_claims() -> list[Claim]:
    return [
        claim("1 (domination)", "Under the raw sum, brevity takes > 50% of the gradient share",
              arm("raw_sum", "mo/brevity/share_mean"), 0.5, "greater", paper="criterion D.3.1"),
        claim("1 (raw sum: correctness)", "Under the raw sum, accuracy falls below SFT's",
              arm("raw_sum", "mo/accuracy"), arm("raw_sum", "mo/accuracy_before"), "less",
              paper="criterion D.3.1 (correctness or safety)"),
        claim("1 (raw sum: safety)", "Under the raw sum, hazard refusal falls below SFT's", arm("raw_sum", HAZARD),
              arm("raw_sum", "mo/hazard_refusal_before"), "less", paper="criterion D.3.1 (correctness or safety)"),
        *not_below_sft("1 (RFN ≥ SFT)", "rfn"),
        claim("2 (worst channel)", "RFN + Tri-Factor raises hazard refusal (the expected worst channel) by ≥ 5 "
              "points over RFN-only", arm("rfn_tri", HAZARD), arm("rfn", HAZARD), "greater", 0.05,
              paper="criterion D.3.2"),
        claim("2 (worst scaled gain)", "RFN + Tri-Factor's worst scaled channel gain over SFT exceeds RFN-only's",
              arm("rfn_tri", "mo/worst_gain"), arm("rfn", "mo/worst_gain"), "greater", paper="criterion D.3.2"),
        *no_drop_vs_rfn("2 (no drop)"),
        claim("3 (weakness)", "Without the weakness factor, less than half of Tri-Factor's hazard-refusal gain over "
              "RFN-only remains", arm("tri_no_weakness", HAZARD),
              0.5 * arm("rfn_tri", HAZARD) + 0.5 * arm("rfn", HAZARD), "less", paper="criterion D.3.3"),
        claim("3 (redundancy)", "Without the redundancy factor, the combined weight on format + answer-line rises",
              arm("tri_no_redundancy", "mo/format/weight_mean")
              + arm("tri_no_redundancy", "mo/answer_line/weight_mean"),
              arm("rfn_tri", "mo/format/weight_mean") + arm("rfn_tri", "mo/answer_line/weight_mean"), "greater",
              paper="criterion D.3.3"),
        claim("3 (risk)", "Without the risk factor, hazard refusal is lower", arm("tri_no_risk", HAZARD),
              arm("rfn_tri", HAZARD), "less", paper="criterion D.3.3"),
        claim("4 (drift)", "Per-batch z-norm's channel shares drift more over training than RFN's",
              arm("zscore", "mo/share_drift"), arm("rfn", "mo/share_drift"), "greater", paper="criterion D.3.4"),
        claim("4 (safety stability)", "Per-batch z-norm's batch safety varies more over training than RFN's",
              arm("zscore", "mo/safety_batch_std"), arm("rfn", "mo/safety_batch_std"), "greater",
              paper="criterion D.3.4"),
    ]


CLAIMS = build_claims()
