"""The claims of the RL base tables (experiments/rl/results/base_table*, experiments/rl/base_table.py), as data for

    python -m shared.stats.ledger --claims experiments.rl._claims

which writes the ledger table of each table's README and its ledger.json. The RL base tables belong to no project,
so their claims live here, beside the table's experiment file (the leading "_" keeps tests/test_experiments.py from
reading this file as an experiment config).

Within a table every arm of a seed starts from that seed's SFT stage, so differences are paired by seed; an arm
against its own start pairs each row with itself. The two tables ran the same recipe and seed numbers on different
machines, and their warm starts differ, so a comparison across the tables is Welch's. The metric is greedy accuracy
on the same 500 test problems (`eval/test_accuracy`, or `eval/greedy_accuracy` where a row reports that key).
"""
from shared.stats.claims import Arm, Claim, Ledger

R = "experiments/rl/results"
ACC = ("eval/test_accuracy", "eval/greedy_accuracy")
START = "eval/test_accuracy_before"
RL_ARMS = {"ppo_gae": "PPO+GAE", "grpo": "GRPO", "drgrpo": "Dr. GRPO", "dapo": "DAPO", "gspo": "GSPO",
           "reinforce++": "REINFORCE++", "reinforce++_baseline": "REINFORCE++-baseline", "rloo": "RLOO",
           "gmpo": "GMPO"}


def arm(name: str, value=ACC, results: str | None = None) -> Arm:
    return Arm({"arm": name}, value, name, results=results)


def table_claims(folder: str) -> list[Claim]:
    results = f"{R}/{folder}"
    claims = []
    for name, label in RL_ARMS.items():
        claims.append(Claim(f"vs SFT: {label}", f"{label} on a competent SFT policy improves greedy accuracy over "
                            "spending the same steps on SFT", results=results, a=arm(name),
                            b=arm("continued_sft"), direction="greater", paired=True, paper="—"))
    for name, label in RL_ARMS.items():
        claims.append(Claim(f"vs start: {label}", f"{label} improves greedy accuracy over its own starting point",
                            results=results, a=arm(name), b=arm(name, START), direction="greater", paired=True,
                            paper="—"))
    for name, label in RL_ARMS.items():
        if name != "grpo":
            claims.append(Claim(f"vs GRPO: {label}", f"{label} beats GRPO in greedy accuracy", results=results,
                                a=arm(name), b=arm("grpo"), direction="greater", paired=True, paper="—"))
    return claims


ACROSS = []
for name, label in RL_ARMS.items():
    ACROSS.append(Claim(f"lr 2e-5 vs 1e-4: {label}", f"{label} at the spec's lr for tiny policies (2e-5) ends above "
                        f"{label} at lr 1e-4", results=f"{R}/base_table_lr2e-5", a=arm(name),
                        b=arm(name, results=f"{R}/base_table"), direction="greater", paired=False,
                        paper="spec: lr 1e-5 … 5e-5 for tiny policies",
                        note="Welch: the two tables' warm starts differ"))

LEDGERS = [
    Ledger("rl/base_table", f"{R}/base_table/README.md", f"{R}/base_table/ledger.json",
           tuple(table_claims("base_table"))),
    Ledger("rl/base_table_lr2e-5", f"{R}/base_table_lr2e-5/README.md", f"{R}/base_table_lr2e-5/ledger.json",
           tuple(table_claims("base_table_lr2e-5") + ACROSS)),
]
