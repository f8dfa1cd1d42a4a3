"""The claims of the proxy_grm ledger (criteria §4.6), as data for `python -m shared.stats.ledger --project proxy_grm`,
which writes the README's ledger table and results/ledger.json.

Tables: results/small (2000-step cold start), results/coldstart (50/100/200-step cold starts, arms `<arm>_n<steps>`)
results/hard (the `type_inference="combo"` world, 400-step cold start), results/hard_lr (its arms B, C at GRPO lr
1e-4), results/hard_cf (the combo world with proxies that must read the rubric: counterfactual proxy data) and
results/hard_cf_big (the same proxies trained on 12k pairs for 2,400 steps: sensitivity 0.32 against 0.11). Arms
share each seed's stages (cold start, proxies), so differences are paired by seed. Verdict and transfer accuracies at
0.5 (within 0.05) sit at chance (either arm). A baseline B within the claim's own margin of the ceiling (1.0) leaves
no room for the claimed gain: B sits at the ceiling (F1 within 0.10, transfer within 0.05, OOD accuracy within 0.03).
"""
from shared.stats.claims import Arm, Claim, Level

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
FULL_TABLE = ("the full table (`python -m shared.sweep --config=experiments/proxy_grm/table.py "
              "--workdir=runs/proxy_grm/table --parallel=16`)")


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
CLAIMS += [
    Claim("3", "F (C with 1/4 of the GRM-RL data) ≥ B (all data) in OOD verdict accuracy",
          paper="1× data vs ≥ 4× (teaser)",
          not_run=f"arms F, B of {FULL_TABLE}; pointless until claim 1's setup has headroom"),
    Claim("4 (sensitivity)", "Proxy-SFT's sensitivity to rubric corruption is larger than Proxy-RL's",
          paper="Proxy-SFT > Proxy-RL (abstract)", not_run=f"arms C, D of {FULL_TABLE}"),
    Claim("4 (transfer)", "C ≥ D in transfer accuracy", paper="Proxy-SFT > Proxy-RL (abstract)",
          not_run=f"arms C, D of {FULL_TABLE}"),
    Claim("5 (E3)", "Additive (C) ≥ gated E3 in verdict accuracy", paper="implicit aggregation best (abstract)",
          not_run=f"arms C, E3 of {FULL_TABLE}"),
    Claim("5 (E7)", "Additive (C) ≥ gated E7 in verdict accuracy", paper="implicit aggregation best (abstract)",
          not_run=f"arms C, E7 of {FULL_TABLE}"),
]
