"""The claims of the OpenRS ledger (spec section 4: mechanisms), as data for
`python -m shared.stats.ledger --project openrs`, which writes the README's ledger table and results/ledger.json.

E1 (results/e1_simulation) and E2 (results/e2_rubricworld; results/e2_combo in the harder combo world): all arms of a
seed share the simulation draws (E1) or the data and test sets (E2), so differences are paired by seed. In E2 a
holistic judge within 0.03 of accuracy 1.0 leaves no room for the claimed +3 points: it sits at the ceiling; one
within 0.05 of 0.5 sits at chance.
"""
from shared.stats.claims import Arm, Claim, Level

E1 = "projects/openrs/results/e1_simulation"
E2 = "projects/openrs/results/e2_rubricworld"


def e1(name: str, value: str) -> Arm:
    return Arm({"arm": name}, value, name)


def e1_claim(cid, text, e, metric, a, b, direction="greater", margin=0.0, note=""):
    bb = b if isinstance(b, float) else e1(b, f"e{e}/{metric}")
    return Claim(cid, text, results=E1, a=e1(a, f"e{e}/{metric}"), b=bb, direction=direction, margin=margin,
                 paired=True, paper="mechanism (no number)", note=note)


CLAIMS = []
for e in ("0.1", "0.2", "0.4"):
    CLAIMS.append(e1_claim(f"E1 veto (e {e})", f"Veto beats the weighted mean on fatal-flaw pairs, comparator error "
                           f"e = {e}", e, "fatal_accuracy", "c_veto", "b_weighted_mean"))
for e in ("0", "0.1", "0.2", "0.4"):
    CLAIMS.append(e1_claim(f"E1 bidirectional (e {e})", f"The bidirectional rule removes ≥ 80% of position-bias-"
                           f"induced errors, e = {e}", e, "bias_error_removal", "d_bidirectional", 0.8,
                           margin=0.0))
CLAIMS.append(e1_claim("E1 ties (e 0.1)", "… at the cost of more ties than the veto arm, e = 0.1", "0.1", "tie_rate",
                       "d_bidirectional", "c_veto"))
for e in ("0.1", "0.2", "0.4"):
    CLAIMS.append(e1_claim(f"E1 pointwise (e {e})", f"Criterion-wise pairwise (veto) beats pointwise scalarisation "
                           f"when calibration noise (2x) exceeds comparison noise, e = {e}", e, "accuracy",
                           "c_veto", "e_pointwise_cal2"))
CLAIMS.append(e1_claim("E1 pointwise control (e 0.2)", "The condition matters: with calibration noise below "
                       "comparison noise (0.5x), criterion-wise pairwise does worse than pointwise", "0.2", "accuracy",
                       "c_veto", "e_pointwise_cal0.5", direction="less",
                       note="the converse of the spec's condition, a check that the condition is what matters"))

TEACHER = "the teacher rubric is the programmatic teacher's, corrupted at its rate (spec §4.2)"
E2_COMBO = "projects/openrs/results/e2_combo"
for world, results, label in (("", E2, ""), (" (combo world)", E2_COMBO, "combo, ")):
    for rubric in ("oracle", "teacher"):
        for n in ("1000", "3000", "10000"):
            metric = f"n{n}/ood/accuracy"
            holistic = e1("holistic", metric)
            CLAIMS.append(Claim(
                f"E2 ({label}{rubric}, {n} pairs)", f"Criterion-wise + external aggregation ≥ holistic + 3 points on "
                f"RubricWorld{world} OOD, {rubric} rubric, {n} training pairs", results=results,
                a=e1(f"criterion_{rubric}", metric), b=holistic, direction="greater", margin=0.03, paired=True,
                levels=(Level(1.0, 0.03, "ceiling", arm=holistic), Level(0.5, 0.05, "chance", arm=holistic)),
                paper="mechanism", note=TEACHER if rubric == "teacher" else ""))

E3 = "projects/openrs/results/e3_min"
E3H = "projects/openrs/results/e3_hack"
E3_FULL = "projects/openrs/results/e3"
E3_HACK = ("`python -m shared.sweep --config=experiments/openrs/e3_brpo_writing.py:hack --workdir=runs/openrs/e3_hack "
           "--parallel=9` (a stronger annotator bias: a holistic judge that does reward the NOTE hack)")
# The rollout means of the last logged step (150 BRPO steps), arms paired by seed (they share its SFT stage).
# Floor: a holistic arm whose hack rate stays within 0.02 of 0 leaves the claimed reduction no room (at bias 0.35
# the holistic judge prefers the NOTE suffix in only 35% of the pairs that differ in it, so RL removes it anyway).
CLAIMS += [
    Claim("E3 (quality)", "Under BRPO the rubric reward (with the PVR guardrail) gives higher oracle quality Q than "
          "the holistic judge", results=E3, a=e1("rubric_pvr", "reward/writing_zero/quality/mean"),
          b=e1("holistic", "reward/writing_zero/quality/mean"), direction="greater", paired=True,
          levels=(Level(0.0, 0.02, "floor"),), paper="mechanism"),
    Claim("E3 (hack rate)", "Under BRPO the rubric reward (with the PVR guardrail) gives a lower hack (NOTE) rate "
          "than the holistic judge", results=E3, a=e1("rubric_pvr", "reward/openrs/note_rate/mean"),
          b=e1("holistic", "reward/openrs/note_rate/mean"), direction="less", paired=True,
          levels=(Level(0.0, 0.02, "floor", arm=e1("holistic", "reward/openrs/note_rate/mean")),),
          paper="mechanism", note="the holistic arm does not hack at the spec's annotator bias; the hack rows below "
          "rerun it with a judge that does (" + E3_HACK + ")"),
    Claim("E3 hack (quality)", "At annotator bias 0.6 (a holistic judge that rewards the NOTE hack), the rubric "
          "reward with the PVR guardrail gives higher oracle quality Q than the holistic judge", results=E3H,
          a=e1("rubric_pvr", "reward/writing_zero/quality/mean"), b=e1("holistic", "reward/writing_zero/quality/mean"),
          direction="greater", paired=True, levels=(Level(0.0, 0.02, "floor"),), paper="mechanism"),
    Claim("E3 hack (hack rate)", "At annotator bias 0.6, the rubric reward with the PVR guardrail gives a lower hack "
          "(NOTE) rate than the holistic judge", results=E3H, a=e1("rubric_pvr", "reward/openrs/note_rate/mean"),
          b=e1("holistic", "reward/openrs/note_rate/mean"), direction="less", paired=True,
          levels=(Level(0.0, 0.02, "floor", arm=e1("holistic", "reward/openrs/note_rate/mean")),),
          paper="mechanism"),
    Claim("E3 hack (biased rubric)", "Stress test: a rubric judge whose every criterion carries the bias 0.6 still "
          "gives a lower hack rate than the holistic judge, thanks to the PVR guardrail", results=E3H,
          a=e1("rubric_biased_pvr", "reward/openrs/note_rate/mean"),
          b=e1("holistic", "reward/openrs/note_rate/mean"), direction="less", paired=True,
          levels=(Level(0.0, 0.02, "floor", arm=e1("holistic", "reward/openrs/note_rate/mean")),),
          paper="ours, not the paper's (it claims no such thing)",
          note="the PVR checks length and coverage, not the NOTE suffix: the rubric's advantage comes from criteria "
               "that do not reward the hack, not from the guardrail"),
    # results/e3: the spec's table, all four judges at annotator bias 0.35 (3 stages + 12 points)
    Claim("E3 full table (quality)", "As E3 (quality), in the full table (holistic, rubric, rubric_pvr, "
          "rubric_biased_pvr)", results=E3_FULL, a=e1("rubric_pvr", "reward/writing_zero/quality/mean"),
          b=e1("holistic", "reward/writing_zero/quality/mean"), direction="greater", paired=True,
          levels=(Level(0.0, 0.02, "floor"),), paper="mechanism"),
    Claim("E3 full table (hack rate)", "As E3 (hack rate), in the full table", results=E3_FULL,
          a=e1("rubric_pvr", "reward/openrs/note_rate/mean"), b=e1("holistic", "reward/openrs/note_rate/mean"),
          direction="less", paired=True,
          levels=(Level(0.0, 0.02, "floor", arm=e1("holistic", "reward/openrs/note_rate/mean")),),
          paper="mechanism", note="the hack rows (results/e3_hack) test it with a holistic judge that hacks"),
    Claim("E3 full table (rubric alone)", "The rubric reward without the PVR guardrail already gives higher oracle "
          "quality Q than the holistic judge", results=E3_FULL, a=e1("rubric", "reward/writing_zero/quality/mean"),
          b=e1("holistic", "reward/writing_zero/quality/mean"), direction="greater", paired=True,
          levels=(Level(0.0, 0.02, "floor"),), paper="ours: which part of the verdict gives the quality"),
    Claim("E3 full table (PVR adds quality)", "The PVR guardrail raises oracle quality Q over the rubric reward alone",
          results=E3_FULL, a=e1("rubric_pvr", "reward/writing_zero/quality/mean"),
          b=e1("rubric", "reward/writing_zero/quality/mean"), direction="greater", paired=True,
          paper="ours: the spec uses the PVR as a hard guardrail and claims nothing of its own"),
    Claim("E3 full table (biased rubric)", "A rubric judge whose every criterion carries the annotator bias 0.35 "
          "(with the PVR) gives a lower hack rate than the holistic judge at the same bias", results=E3_FULL,
          a=e1("rubric_biased_pvr", "reward/openrs/note_rate/mean"),
          b=e1("holistic", "reward/openrs/note_rate/mean"), direction="less", paired=True,
          paper="ours, not the paper's (a stress test of per-criterion bias)",
          note="per-criterion bias adds up in the aggregation (projects/openrs/tests/test_writing.py)"),
    Claim("E4", "The library judge with the released meta-rubric on HH-RLHF harmless / GSM8K matches the reference",
          paper="Table 1 (e.g. RM-Bench 91-93 with 30B-235B judges)",
          not_run="no endpoint, and the released prompts are not available offline: `JUDGE_BASE_URL=... "
                  "JUDGE_MODEL=... python -m shared.launch --config=experiments/openrs/http_judge.py "
                  "--workdir=runs/openrs/hh_judge`"),
]
