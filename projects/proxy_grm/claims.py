"""The claims of the proxy_grm ledger (criteria §4.6), as data for `python -m shared.stats.ledger --project proxy_grm`,
which writes the README's ledger table and results/ledger.json.

Tables: results/small (2000-step cold start), results/coldstart (50/100/200-step cold starts, arms `<arm>_n<steps>`)
results/hard (the `type_inference="combo"` world, 400-step cold start), results/hard_lr (its arms B, C at GRPO lr
1e-4), results/hard_cf (the combo world with proxies that must read the rubric: counterfactual proxy data) and
results/hard_cf_big (the same proxies trained on 12k pairs for 2,400 steps: sensitivity 0.32 against 0.11); claims
3-5 read results/hard_cf_big_full (every arm A-F in hard_cf_big's setup) once it is committed. Arms
share each seed's stages (cold start, proxies), so differences are paired by seed. Verdict and transfer accuracies at
0.5 (within 0.05) sit at chance (either arm). A baseline B within the claim's own margin of the ceiling (1.0) leaves
no room for the claimed gain: B sits at the ceiling (F1 within 0.10, transfer within 0.05, OOD accuracy within 0.03).
"""
import os

from shared.stats.claims import Arm, Claim, Level

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

R = "projects/proxy_grm/results"
CHANCE = Level(0.5, 0.05, "chance")
SETTINGS = (  # (label, table folder, arm suffix)
    ("small", "small", ""),
    ("cold start 50", "coldstart", "_n50"),
    ("cold start 100", "coldstart", "_n100"),
    ("cold start 200", "coldstart", "_n200"),
    ("hard", "hard", ""),
    ("hard, lr 1e-4", "hard_lr", ""),
    ("hard, rubric-reading proxy", "hard_cf", ""),
    ("hard, rubric-reading proxy on 12k pairs", "hard_cf_big", ""),
)
# claims 3-5 read the full table (arms A-F) in hard_cf_big's setup, the one where the proxies read the rubric
FULL = "hard_cf_big_full"
FULL_TABLE = ("the full table (`python -m shared.sweep --config=experiments/proxy_grm/table.py:hard_cf_big_full "
              "--workdir=runs/proxy_grm/hard_cf_big_full --parallel=12`)")
# "X ≥ Y" without a stated margin reads as non-inferiority within 1 point, the margin claim 2 states for its ID part
AT_LEAST = -0.01


def arm(name: str, suffix: str, value: str) -> Arm:
    return Arm({"arm": name + suffix}, value, name + suffix)


def claims_for(label: str, folder: str, suffix: str) -> list[Claim]:
    def c_vs_b(cid, text, value, margin, levels, paper, note=""):
        return Claim(f"{cid} ({label})", text, results=f"{R}/{folder}", a=arm("C", suffix, value),
                     b=arm("B", suffix, value), direction="greater", margin=margin, paired=True, levels=levels,
                     paper=paper, note=note)

    def ceiling(value, margin):  # the baseline within the claimed margin of 1.0: no room for the gain
        return Level(1.0, margin, "ceiling", arm=arm("B", suffix, value))

    return [
        c_vs_b("1 (transfer a)", "C beats B by ≥ 5 points in OOD transfer accuracy of the unseen proxy (a)",
               "grm/ood_transfer_a", 0.05, (CHANCE, ceiling("grm/ood_transfer_a", 0.05)),
               "rubrics transfer to unseen evaluators (abstract)"),
        c_vs_b("1 (transfer b)", "C beats B by ≥ 5 points in OOD transfer accuracy of the rule evaluator (b)",
               "grm/ood_transfer_b", 0.05, (CHANCE, ceiling("grm/ood_transfer_b", 0.05)),
               "rubrics transfer to unseen evaluators (abstract)"),
        c_vs_b("1 (F1)", "C beats B by ≥ 0.10 in ID greedy rubric F1", "grm/id_rubric_f1", 0.10,
               (ceiling("grm/id_rubric_f1", 0.10),), "more informative rubrics (abstract)"),
        c_vs_b("2 (ID)", "C ≥ B − 1 point in ID verdict accuracy", "grm/id_acc", -0.01, (CHANCE,),
               "VL-RewardBench 75.22 etc. (not comparable)"),
        c_vs_b("2 (OOD)", "C ≥ B + 3 points in OOD verdict accuracy (B leans on STYLE)", "grm/ood_acc", 0.03,
               (CHANCE, ceiling("grm/ood_acc", 0.03)), "VL-RewardBench 75.22 etc. (not comparable)"),
    ]


CLAIMS = [c for setting in SETTINGS for c in claims_for(*setting)]


def full_claim(cid: str, text: str, a: Arm, b: Arm, margin: float, paper: str, levels=(), note: str = "",
               arms: str = "") -> Claim:
    """A claim on the full table: evaluated once results/hard_cf_big_full exists, else "not run yet"."""
    if os.path.isdir(os.path.join(REPO, R, FULL)):
        return Claim(cid, text, results=f"{R}/{FULL}", a=a, b=b, direction="greater", margin=margin, paired=True,
                     levels=levels, paper=paper, note=note)
    return Claim(cid, text, paper=paper, not_run=f"arms {arms} of {FULL_TABLE}")


def full_arm(name: str, value: str) -> Arm:
    return arm(name, "", value)  # the arm column holds the bare arm (A-F); the point names carry _combo


CLAIMS += [
    full_claim("3", "F (C with 1/4 of the GRM-RL data) ≥ B (all data) in OOD verdict accuracy",
               full_arm("F", "grm/ood_acc"), full_arm("B", "grm/ood_acc"), AT_LEAST, "1× data vs ≥ 4× (teaser)",
               (CHANCE,), note="≥ read as within 1 point", arms="F, B"),
    full_claim("4 (sensitivity)", "Proxy-SFT's sensitivity to rubric corruption is larger than Proxy-RL's",
               full_arm("C", "proxy/sensitivity"), full_arm("D", "proxy/sensitivity"), 0.0,
               "Proxy-SFT > Proxy-RL (abstract)", note="proxy/sensitivity of each arm's training proxy", arms="C, D"),
    full_claim("4 (transfer a)", "C ≥ D in OOD transfer accuracy of the unseen proxy (a)",
               full_arm("C", "grm/ood_transfer_a"), full_arm("D", "grm/ood_transfer_a"), AT_LEAST,
               "Proxy-SFT > Proxy-RL (abstract)", (CHANCE,), note="≥ read as within 1 point", arms="C, D"),
    full_claim("4 (transfer b)", "C ≥ D in OOD transfer accuracy of the rule evaluator (b)",
               full_arm("C", "grm/ood_transfer_b"), full_arm("D", "grm/ood_transfer_b"), AT_LEAST,
               "Proxy-SFT > Proxy-RL (abstract)", (CHANCE,), note="≥ read as within 1 point", arms="C, D"),
    full_claim("5 (E3)", "Additive (C) ≥ gated E3 in ID verdict accuracy", full_arm("C", "grm/id_acc"),
               full_arm("E3", "grm/id_acc"), AT_LEAST, "implicit aggregation best (abstract)", (CHANCE,),
               note="≥ read as within 1 point", arms="C, E3"),
    full_claim("5 (E7)", "Additive (C) ≥ gated E7 in ID verdict accuracy", full_arm("C", "grm/id_acc"),
               full_arm("E7", "grm/id_acc"), AT_LEAST, "implicit aggregation best (abstract)", (CHANCE,),
               note="≥ read as within 1 point", arms="C, E7"),
]
