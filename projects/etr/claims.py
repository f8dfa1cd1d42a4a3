"""The claims of the ETR ledger (criteria D.4 of ../shared/papers/etr.md), as data for
`python -m shared.stats.ledger --project etr`, which writes the README's ledger table and results/ledger.json.

Each criterion is tested on both tasks of D.1: results/countdown (experiments/etr/countdown_table.py) and
results/cot (experiments/etr/cot_table.py). Every arm of a seed starts from that seed's SFT stage, so differences
are paired by seed. Accuracies are fractions: "1 point" is 0.01. "≥ 1.3× GRPO's entropy" is etr_full − 1.3 × grpo
> 0; "no blow-up (> 2× the SFT value)" is entropy_last − 2 × entropy_first < 0 (entropy_first: the first RL step's
entropy, the warm start on its own samples); "ID accuracy not lower" is non-inferiority within 1 point (margin
−0.01). Criterion 4 ("between GRPO and ETR-full on at least one of entropy, hard accuracy") is four one-sided
claims per ablation; the criterion holds for an ablation when both claims of one measure are reproduced.

A claim reads its table once the folder holds a committed manifest; until then it is "not run yet" with the
command that makes the table. Criteria 1, 2 and 5 read only GRPO and ETR-full, so they read the task's ":min" table
(results/<task>_min: those two arms, no pilots) while the full table is not committed.
"""
import os

from shared.stats.claims import Arm, Claim, Level

TABLES = {"countdown": ("projects/etr/results/countdown", "experiments/etr/countdown_table.py", 8),
          "cot": ("projects/etr/results/cot", "experiments/etr/cot_table.py", 8)}
NAMES = {"grpo": "GRPO", "clip_higher": "Clip-higher", "eps_matched": "ε-matched GRPO", "etr_micro": "ETR-micro",
         "etr_macro": "ETR-macro", "etr_full": "ETR-full", "etr_implicit": "ETR-implicit"}
ENTROPY, HARD, ID = "etr/entropy_last", "etr/hard_avg@8", "etr/id_avg@8"
HARD_FLOOR = Level(0.0, 0.01, "floor", column=HARD)
MIN_CRITERIA = ("1", "2", "5")     # the criteria whose arms (grpo, etr_full) the :min table runs


def arm(name: str, value: str) -> Arm:
    return Arm({"arm": name}, value, NAMES[name])


def claim(task: str, cid: str, text: str, a, b, direction: str, margin: float = 0.0, levels=(), paper="",
          note="") -> Claim:
    folder, config, parallel = TABLES[task]
    folders = [folder]
    if cid.split(" ")[0] in MIN_CRITERIA:   # the full table once committed, else the :min one
        folders.append(folder + "_min")
        config += ":min"
    return Claim.once_run(f"{task} {cid}", text, results=folders, a=a, b=b, direction=direction, margin=margin,
                          paired=True, levels=levels, paper=paper, note=note,
                          not_run=f"`python -m shared.sweep --config={config} --workdir=runs/etr/"
                                  f"{os.path.basename(folders[-1])} --parallel={parallel}` (then commit its results "
                                  f"to {folders[-1]})")


def task_claims(task: str) -> list[Claim]:
    out = [
        claim(task, "1", "ETR-full's final token entropy ≥ 1.3× GRPO's", arm("etr_full", ENTROPY),
              1.3 * arm("grpo", ENTROPY), "greater", paper="less entropy decay than GRPO (qualitative)"),
        claim(task, "1 (area)", "ETR-full's area under the entropy curve exceeds GRPO's (alternative of 1)",
              arm("etr_full", "etr/entropy_auc"), arm("grpo", "etr/entropy_auc"), "greater",
              paper="less entropy decay than GRPO (qualitative)"),
        claim(task, "1 (no blow-up)", "ETR-full's final entropy stays below 2× the warm start's",
              arm("etr_full", ENTROPY), 2.0 * arm("etr_full", "etr/entropy_first"), "less", paper="criterion D.4.1"),
        claim(task, "2 (hard)", "ETR-full beats GRPO on hard-set avg@8 by ≥ 1 point", arm("etr_full", HARD),
              arm("grpo", HARD), "greater", 0.01, (HARD_FLOOR,), paper="ETR > GRPO on AIME / MATH (qualitative)"),
        claim(task, "2 (ID)", "ETR-full's ID avg@8 is not lower than GRPO's (within 1 point)", arm("etr_full", ID),
              arm("grpo", ID), "greater", -0.01, paper="criterion D.4.2"),
        claim(task, "3 (vs Clip-higher)", "ETR-full beats Clip-higher on hard-set avg@8", arm("etr_full", HARD),
              arm("clip_higher", HARD), "greater", levels=(HARD_FLOOR,), paper="criterion D.4.3"),
        claim(task, "3 (vs ε-matched)", "ETR-full beats ε-matched GRPO on hard-set avg@8", arm("etr_full", HARD),
              arm("eps_matched", HARD), "greater", levels=(HARD_FLOOR,), paper="criterion D.4.3"),
    ]
    for ablation in ("etr_micro", "etr_macro"):
        for value, measure, levels in ((ENTROPY, "final entropy", ()), (HARD, "hard avg@8", (HARD_FLOOR,))):
            label = f"4 ({NAMES[ablation]}, {measure}"
            out.append(claim(task, label + ", > GRPO)", f"{NAMES[ablation]} is above GRPO on {measure}",
                             arm(ablation, value), arm("grpo", value), "greater", levels=levels,
                             paper="criterion D.4.4"))
            out.append(claim(task, label + ", < ETR-full)", f"{NAMES[ablation]} is below ETR-full on {measure}",
                             arm(ablation, value), arm("etr_full", value), "less", levels=levels,
                             paper="criterion D.4.4"))
    out.append(claim(task, "5 (pass@16)", "ETR-full's hard-set pass@16 does not fall below the warm start's "
                     "(within 1 point)", arm("etr_full", "etr/hard_pass@16"), arm("etr_full", "etr/hard_pass@16_before"),
                     "greater", -0.01, (HARD_FLOOR,), paper="additional sign of D.4"))
    return out


CLAIMS = task_claims("countdown") + task_claims("cot")
