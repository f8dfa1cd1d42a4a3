"""The claims of the Writing-Zero ledger (../shared/papers/writing_zero_brpo.md 4.6), as data for
`python -m shared.stats.ledger --project writing_zero`, which writes the README's ledger table and
results/ledger.json.

Tables: results/c1 (R6 BRPO, R7 round robin, R8 fixed reference, all on the oracle judge; 400 RL steps),
results/c1_long (the same at 1,200 steps: at 400 BRPO was still rising), results/c2 (R1 GRPO on
the biased scalar RM, R2 BRPO on the plain judge, R3 BRPO on the principled judge), 3 seeds each, results/c2_8seeds
(c2 at 8 seeds) and results/rest (R0, R3, R3n, R4, R5 on the principled judge, 3 seeds). Every arm of a seed
starts from the same "-Zero" policy (and judges / RM), so differences are paired by seed.

Spec 4.6 states C1 as a ratio of final Q; Q is a signed score (the warm start sits near -0.75), so the ratio is taken
of the gain over the warm start (wz/q_final - wz/q_before, the same warm start for every arm of a seed). Its judge-call
half (BRPO at 2/G of round robin's calls, plus DAPO's refills) is a count fixed by the plan, not a measurement with
an interval: the README gives it beside the ledger. C2's hacking criterion (spec: proxy up, Q down >= 20% from its
peak, NOTE rate > 50%) is three claims, one per part, so the table shows which part holds.
"""
from shared.stats.claims import Arm, Claim

C1 = "projects/writing_zero/results/c1"
C1_LONG = "projects/writing_zero/results/c1_long"
C2 = "projects/writing_zero/results/c2"
C2_8 = "projects/writing_zero/results/c2_8seeds"
REST = "projects/writing_zero/results/rest"
LABELS = {"R1": "R1 GRPO, scalar RM", "R2": "R2 BRPO, plain judge",
          "R3": "R3 BRPO, principled judge", "R3n": "R3n BRPO-norm, principled judge",
          "R4": "R4 round robin, principled judge", "R5": "R5 fixed reference, principled judge",
          "R6": "R6 BRPO", "R7": "R7 round robin", "R8": "R8 fixed reference"}


def arm(name: str, column: str) -> Arm:
    return Arm({"arm": name}, column, LABELS[name])


def gain(name: str) -> Arm:
    """Q gained over the warm start, row by row (a seed's arms share the warm start)."""
    return arm(name, "wz/q_final") - arm(name, "wz/q_before")


CLAIMS = [
    Claim("C1 (quality)", "BRPO (R6) gains >= 90% of round robin's (R7) Q gain over the warm start, oracle judge",
          results=C1, a=gain("R6"), b=0.9 * gain("R7"), direction="greater", margin=0.0, paired=True,
          paper="BRPO matches round robin's quality at 2/G of the judge calls (spec 4.6 C1)",
          note="gain = wz/q_final - wz/q_before (Q is signed)"),
    Claim("C1 (R8 below R6)", "The fixed reference (R8) ends below BRPO (R6) in Q", results=C1,
          a=arm("R8", "wz/q_final"), b=arm("R6", "wz/q_final"), direction="less", margin=0.0, paired=True,
          paper="fixed reference stalls (spec 4.6 C1)"),
    Claim("C1 (R8 stalls)", "R8's groups win all their comparisons: share of all-win groups at the end > 0.5 "
          "(spec: it goes to 1)", results=C1, a=arm("R8", "rl/pairwise_all_win_frac"), b=0.5,
          direction="greater", margin=0.0, paired=True, paper="fixed reference stalls (spec 4.6 C1)"),
    Claim("C1 at 1,200 steps (quality)", "As C1 (quality), after 1,200 RL steps", results=C1_LONG,
          a=gain("R6"), b=0.9 * gain("R7"), direction="greater", margin=0.0, paired=True,
          paper="BRPO matches round robin's quality at 2/G of the judge calls (spec 4.6 C1)",
          note="gain = wz/q_final - wz/q_before (Q is signed)"),
    Claim("C1 at 1,200 steps (R8 below R6)", "As C1 (R8 below R6), after 1,200 RL steps", results=C1_LONG,
          a=arm("R8", "wz/q_final"), b=arm("R6", "wz/q_final"), direction="less", margin=0.0, paired=True,
          paper="fixed reference stalls (spec 4.6 C1)"),
    Claim("C1 at 1,200 steps (R8 stalls)", "As C1 (R8 stalls), after 1,200 RL steps", results=C1_LONG,
          a=arm("R8", "rl/pairwise_all_win_frac"), b=0.5, direction="greater", margin=0.0, paired=True,
          paper="fixed reference stalls (spec 4.6 C1)"),
    Claim("C2 (R1 Q falls)", "GRPO on the biased scalar RM (R1) loses >= 20% of its peak Q by the end", results=C2,
          a=arm("R1", "wz/q_drop"), b=0.2, direction="greater", margin=0.0, paired=True,
          paper="the scalar RM is hacked (spec 4.6 C2)", note="wz/q_drop = (peak - final) / |peak|"),
    Claim("C2 (R1 proxy rises)", "R1's reward (the RM's score) rises after the Q peak", results=C2,
          a=arm("R1", "wz/proxy_rise"), b=0.0, direction="greater", margin=0.0, paired=True,
          paper="the scalar RM is hacked (spec 4.6 C2)"),
    Claim("C2 (R1 NOTE)", "R1 hacks through the NOTE suffix: NOTE rate at the end > 50%", results=C2,
          a=arm("R1", "wz/note_rate"), b=0.5, direction="greater", margin=0.0, paired=True,
          paper="the scalar RM is hacked (spec 4.6 C2)",
          note="the RM's bias prefers the NOTE suffix and longer responses"),
    Claim("C2 (R3 quality)", "BRPO on the principled judge (R3) ends at Q >= R1's peak Q", results=C2,
          a=arm("R3", "wz/q_final"), b=arm("R1", "wz/q_peak"), direction="greater", margin=0.0, paired=True,
          paper="the principled judge is not hacked (spec 4.6 C2)"),
    Claim("C2 (R3 NOTE)", "R3's NOTE rate at the end < 10%", results=C2, a=arm("R3", "wz/note_rate"), b=0.1,
          direction="less", margin=0.0, paired=True, paper="the principled judge is not hacked (spec 4.6 C2)"),
    Claim("C2 (R3 length)", "R3's responses keep to the requested length band: share in band at the end > 0.5",
          results=C2, a=arm("R3", "wz/in_band"), b=0.5, direction="greater", margin=0.0, paired=True,
          paper="the principled judge is not hacked (spec 4.6 C2)",
          note="\"length within the requested band\" read as most responses in band"),
    Claim("R2 vs R3 (principles)", "The principle tokens help: BRPO on the principled judge (R3) ends above BRPO on the "
          "plain judge (R2) in Q", results=C2, a=arm("R3", "wz/q_final"), b=arm("R2", "wz/q_final"),
          direction="greater", margin=0.0, paired=True, paper="R2 vs R3 isolates the principle effect (spec 4.6)"),
    Claim("R1 vs R2 (pairwise)", "On the same biased data, the pairwise judge (R2, BRPO) ends above the scalar RM (R1, "
          "GRPO) in Q", results=C2, a=arm("R2", "wz/q_final"), b=arm("R1", "wz/q_final"), direction="greater",
          margin=0.0, paired=True, paper="R1 vs R2 isolates scalar vs pairwise (spec 4.6)"),
    # results/c2_8seeds: every C2 row at 8 seeds (the same table as results/c2, run again whole with seeds 0-7)
    Claim("C2 at 8 seeds (R1 Q falls)", "As C2 (R1 Q falls), 8 seeds", results=C2_8, a=arm("R1", "wz/q_drop"), b=0.2,
          direction="greater", margin=0.0, paired=True, paper="the scalar RM is hacked (spec 4.6 C2)",
          note="wz/q_drop = (peak - final) / |peak|"),
    Claim("C2 at 8 seeds (R1 proxy rises)", "As C2 (R1 proxy rises), 8 seeds", results=C2_8,
          a=arm("R1", "wz/proxy_rise"), b=0.0, direction="greater", margin=0.0, paired=True,
          paper="the scalar RM is hacked (spec 4.6 C2)"),
    Claim("C2 at 8 seeds (R1 NOTE)", "As C2 (R1 NOTE), 8 seeds", results=C2_8, a=arm("R1", "wz/note_rate"), b=0.5,
          direction="greater", margin=0.0, paired=True, paper="the scalar RM is hacked (spec 4.6 C2)"),
    Claim("R1 vs R2 at 8 seeds (pairwise)", "As R1 vs R2 (pairwise), 8 seeds", results=C2_8,
          a=arm("R2", "wz/q_final"), b=arm("R1", "wz/q_final"), direction="greater", margin=0.0, paired=True,
          paper="R1 vs R2 isolates scalar vs pairwise (spec 4.6)"),
    Claim("C2 at 8 seeds (R3 quality)", "As C2 (R3 quality), 8 seeds", results=C2_8, a=arm("R3", "wz/q_final"),
          b=arm("R1", "wz/q_peak"), direction="greater", margin=0.0, paired=True,
          paper="the principled judge is not hacked (spec 4.6 C2)"),
    Claim("C2 at 8 seeds (R3 NOTE)", "As C2 (R3 NOTE), 8 seeds", results=C2_8, a=arm("R3", "wz/note_rate"), b=0.1,
          direction="less", margin=0.0, paired=True, paper="the principled judge is not hacked (spec 4.6 C2)"),
    Claim("C2 at 8 seeds (R3 length)", "As C2 (R3 length), 8 seeds", results=C2_8, a=arm("R3", "wz/in_band"), b=0.5,
          direction="greater", margin=0.0, paired=True, paper="the principled judge is not hacked (spec 4.6 C2)",
          note="\"length within the requested band\" read as most responses in band"),
    Claim("R2 vs R3 at 8 seeds (principles)", "As R2 vs R3 (principles), 8 seeds", results=C2_8,
          a=arm("R3", "wz/q_final"), b=arm("R2", "wz/q_final"), direction="greater", margin=0.0, paired=True,
          paper="R2 vs R3 isolates the principle effect (spec 4.6)"),
    # results/rest: the arms on the principled (learned) judge that c1 runs on the oracle judge, and R3 vs R3n
    Claim("C1 on the principled judge (quality)", "BRPO (R3) gains >= 90% of round robin's (R4) Q gain over the warm "
          "start, both on the learned principled judge", results=REST, a=gain("R3"), b=0.9 * gain("R4"),
          direction="greater", margin=0.0, paired=True,
          paper="BRPO matches round robin's quality at 2/G of the judge calls (spec 4.6 C1)",
          note="C1's arms with the learned judge of C2 instead of the oracle judge"),
    Claim("C1 on the principled judge (R5 below R3)", "The fixed reference (R5) ends below BRPO (R3) in Q, principled "
          "judge", results=REST, a=arm("R5", "wz/q_final"), b=arm("R3", "wz/q_final"), direction="less",
          margin=0.0, paired=True, paper="fixed reference stalls (spec 4.6 C1)"),
    Claim("R3 vs R3n (advantage)", "BRPO's group-normalised advantage (R3n) ends above the raw +-1 advantage (R3) "
          "in Q", results=REST, a=arm("R3n", "wz/q_final"), b=arm("R3", "wz/q_final"), direction="greater",
          margin=0.0, paired=True, paper="R3 vs R3n decides the default variant (spec 4.6)",
          note="a choice, not a paper claim: not reproduced keeps raw, the library's default"),
]
