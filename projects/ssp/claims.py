"""The claims of the SSP ledger (criteria D.4 of ../shared/papers/ssp.md), as data for
`python -m shared.stats.ledger --project ssp`, which writes the README's ledger table and results/ledger.json.

Tables: results/min (experiments/ssp/selfplay.py:min: ssp, solver_only, proposer_only x 3 seeds; claims 1-2) and
results/table (every arm of D.3 x 3 seeds; claims 3-4). Every arm of a seed starts from that seed's SFT stage, so
differences are paired by seed. Accuracies are fractions: "5 points" is 0.05. A claim reads its table once the folder
holds a committed manifest; until then it is "not run yet" with the command that makes the table.
"""
from shared.stats.claims import Arm, Claim, Level

TABLES = {"min": ("projects/ssp/results/min", "experiments/ssp/selfplay.py:min", 4),
          "table": ("projects/ssp/results/table", "experiments/ssp/selfplay.py", 8)}
NAMES = {"ssp": "SSP", "solver_only": "solver-only", "proposer_only": "proposer-only", "no_rag": "no RAG check",
         "distractors_0": "0 distractors", "distractors_8": "8 distractors", "penalty": "-0.1 invalid penalty"}
ACC, ACC_BEFORE, ACC_H3 = "eval/acc_mean", "eval/acc_mean_before", "eval/acc_h3"
ACC_FLOOR = Level(0.0, 0.01, "floor", column=ACC)
VALID, INVALID = "rl/role/proposer/valid_rate", "rl/role/proposer/run_oracle_invalid_rate"
PRECISION = "rl/role/proposer/run_filter_precision"


def arm(name: str, value: str) -> Arm:
    return Arm({"arm": name}, value, NAMES[name])


def claim(table: str, cid: str, text: str, a, b, direction: str, margin: float = 0.0, levels=(), paper="",
          note="") -> Claim:
    folder, config, parallel = TABLES[table]
    return Claim.once_run(cid, text, results=folder, a=a, b=b, direction=direction, margin=margin, paired=True,
                          levels=levels, paper=paper, note=note,
                          not_run=f"`python -m shared.sweep --config={config} --workdir=runs/ssp/{table} "
                                  f"--parallel={parallel}` (then commit its results to {folder})")


CLAIMS = [
    claim("min", "1", "SSP's held-out accuracy rises >= 5 points over its own SFT start", arm("ssp", ACC),
          arm("ssp", ACC_BEFORE), "greater", 0.05, (ACC_FLOOR,),
          paper="+26.4 avg (7B base), +8.0 (7B instruct)"),
    claim("min", "1 (multi-hop)", "SSP's 3-hop accuracy rises over its SFT start", arm("ssp", ACC_H3),
          arm("ssp", "eval/acc_h3_before"), "greater", paper="largest gains on multi-hop questions"),
    claim("min", "2 (vs solver-only)", "SSP ends above solver-only in held-out accuracy", arm("ssp", ACC),
          arm("solver_only", ACC), "greater", levels=(ACC_FLOOR,), paper="49.5 vs 44.2"),
    claim("min", "2 (vs proposer-only)", "SSP ends above proposer-only in held-out accuracy", arm("ssp", ACC),
          arm("proposer_only", ACC), "greater", levels=(ACC_FLOOR,), paper="49.5 vs 41.7"),
    claim("table", "3 (no RAG: accuracy)", "Without the RAG check held-out accuracy is lower", arm("no_rag", ACC),
          arm("ssp", ACC), "less", levels=(ACC_FLOOR,), paper="none 49.5/36.7 vs 4 docs 60.0/41.6"),
    claim("table", "3 (no RAG: invalid)", "Without the RAG check more training questions are oracle-invalid",
          arm("no_rag", INVALID), arm("ssp", INVALID), "greater", paper="criterion D.4.3"),
    claim("table", "3 (distractors)", "4 distractors beat 0 on the filter's oracle precision", arm("ssp", PRECISION),
          arm("distractors_0", PRECISION), "greater", paper="criterion D.4.3", note="ssp runs 4 distractors"),
    claim("table", "4 (penalty)", "With the -0.1 invalid penalty the valid-question rate falls below SSP's",
          arm("penalty", VALID), arm("ssp", VALID), "less", paper="valid rate ~0.006 (death spiral)"),
]
