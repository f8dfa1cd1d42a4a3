"""The claims of the Trace2Skill ledger (spec ../shared/papers/trace2skill.md 4.5, "Reproduced if"), as data for
`python -m shared.stats.ledger --project trace2skill`, which writes the README's ledger table and
results/ledger.json.

One table (results/evolution), teacher-agent track: each point is one evolution seed and holds every arm as a
column, all evaluated on the same tasks with the same random stream, so differences are paired by seed. Keys are
<mode>/<source>/<arm>/<agent>/<split>: mode deepening | creation (the seed skill), source S | L (whose trajectories
the skill was evolved from), agent S | L (who is evaluated), split test (in-distribution cell writing) | ood
(TableQA). "A >= B" claims of the spec are read as superiority (the paper reports gains: +4.0 / +6.8 pp over
Seq-B=1 / Seq-B=4 for the small model, secondary sources); "beats" is superiority with margin 0.
"""
import dataclasses

from shared.stats.claims import Arm, Claim, Level

RESULTS = "projects/trace2skill/results/evolution"
PAPER_SEQ = "+4.0 / +6.8 pp over Seq-B=1 / Seq-B=4 (small model; secondary sources, unverified)"
PAPER = "no number for this analog (paper body not retrieved)"


def col(key: str, label: str) -> Arm:
    return Arm({"arm": "evolution"}, key, label)


def claim(cid, text, a, b, direction="greater", margin=0.0, paper=PAPER, note="", levels=()):
    return Claim(cid, text, results=RESULTS, a=a, b=b, direction=direction, margin=margin, paired=True,
                 paper=paper, note=note, levels=levels)


def rate(mode, source, arm, agent=None, split="test"):
    agent = agent or source
    return col(f"{mode}/{source}/{arm}/{agent}/{split}", f"{arm} ({mode}, from {source}, agent {agent}, {split})")


def rate_claim(cid, text, mode, source, a_arm, b_arm, split="test", paper=PAPER, note=""):
    """a beats b on success: inconclusive when a sits at the floor (0) or b at the ceiling, i.e. within half a
    point of the oracle skill's success (one precise rule for every quirk: no skill of this rule library does
    better, so a cannot beat a b that is there)."""
    below = col(f"{mode}/{source}/{b_arm}/{source}/{split}/below_oracle", f"oracle - {b_arm}")
    levels = (Level(0.0, 0.02, "floor", arm=rate(mode, source, a_arm, split=split)),
              Level(0.0, 0.005, "ceiling", arm=below))
    return claim(cid, text, rate(mode, source, a_arm, split=split), rate(mode, source, b_arm, split=split),
                 paper=paper, note=note, levels=levels)


CLAIMS = []
# 1: Trace2Skill (combined) beats S0 and no skill, in-distribution, for S and L, deepening and creation
for mode in ("deepening", "creation"):
    for who in ("S", "L"):
        for base, base_name in (("s0", "the seed skill S0"), ("none", "no skill")):
            CLAIMS.append(rate_claim(f"1 ({mode}, {who}, vs {base})",
                                     f"Trace2Skill (combined) beats {base_name}: held-out in-distribution success, "
                                     f"agent {who} on its own trajectories, {mode}", mode, who, "t2s", base))
# 2: parallel consolidation beats sequential editing and the retrieval bank; tau = 1 loses part of the gap
for mode in ("deepening", "creation"):
    for base, base_name, paper in (("seq_b1", "Seq-B=1", PAPER_SEQ), ("seq_b4", "Seq-B=4", PAPER_SEQ),
                                   ("bank", "the retrieval bank at equal budget", PAPER),
                                   ("t2s_tau1", "tau = 1 (merge = concatenate: no prevalence filter)", PAPER)):
        CLAIMS.append(rate_claim(f"2 ({mode}, vs {base})", f"Trace2Skill beats {base_name} (agent S, "
                                 f"in-distribution, {mode})", mode, "S", "t2s", base, paper=paper))
# 3: transfer across scale and to OOD
for mode in ("deepening", "creation"):
    CLAIMS.append(Claim(f"3 ({mode}, S to L)", f"An S-evolved skill improves L by at least half of L's own-skill "
                        f"gain ({mode}; (L with S's skill - L with S0) - 0.5 (L with L's skill - L with S0) > 0)",
                        results=RESULTS, a=col(f"{mode}/transfer_S_to_L/excess", "excess over half the own gain"),
                        b=0.0, direction="greater", margin=0.0, paired=True, paper=PAPER))
    CLAIMS.append(rate_claim(f"3 ({mode}, OOD)", f"A skill evolved on in-distribution tasks improves OOD TableQA "
                             f"(agent S, {mode})", mode, "S", "t2s", "s0", split="ood"))
# 4: agentic error analysis beats single-call analysis
for mode in ("deepening", "creation"):
    CLAIMS.append(claim(f"4 ({mode}, precision)", f"Agentic error analysis gives more precise lessons than a single "
                        f"call (share of lessons naming a true quirk of their task with the right polarity; {mode}, "
                        f"trajectories of S)", col(f"{mode}/S/lessons/agentic/precision", "agentic"),
                        col(f"{mode}/S/lessons/single/precision", "single call")))
    CLAIMS.append(rate_claim(f"4 ({mode}, success)", f"... and higher final success (Trace2Skill combined with the "
                             f"agentic vs the single-call error analyst; agent S, {mode})", mode, "S", "t2s",
                             "t2s_single"))
# 5: diagnostics: Trace2Skill dominates Seq-B=1 on rule precision, recall, local/over-general share, contradictions
for mode in ("deepening", "creation"):
    for name, text, direction in (("precision", "rule precision", "greater"), ("recall", "rule recall", "greater"),
                                  ("local_share", "share of instance-local rules", "less"),
                                  ("over_share", "share of over-general rules", "less"),
                                  ("contradictions", "contradiction count", "less")):
        higher = "higher" if direction == "greater" else "lower"
        CLAIMS.append(claim(f"5 ({mode}, {name})", f"Trace2Skill's skill has a {higher} {text} than Seq-B=1's "
                            f"({mode}, from S)", col(f"{mode}/S/t2s/diag/{name}", "Trace2Skill"),
                            col(f"{mode}/S/seq_b1/diag/{name}", "Seq-B=1"), direction=direction))

# the same claims on the lean table (50 evolution tasks instead of 200: our harder setup)
LEAN = "projects/trace2skill/results/evolution_lean"
CLAIMS += [dataclasses.replace(c, id=f"{c.id} [lean]", results=LEAN) for c in list(CLAIMS)]
