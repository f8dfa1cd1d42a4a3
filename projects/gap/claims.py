"""The claims of the GAP ledger (spec ../shared/papers/gap.md 4.8, "Criteria for reproduced"), as data for
`python -m shared.stats.ledger --project gap`, which writes the README's ledger table and results/ledger.json.

Claim N (the norm premise) is measured by spec 4.9's calibration table P0 (results/p0, 2 seeds) until the full
table (results/table, 3 seeds) is committed: each criterion is one seed-wise value against its fixed bound. E, G
and I compare variants of the full table (points grouped by "arm" = variant name, paired by seed: every variant of
a seed starts from that seed's stage A); until it runs they are "not run yet" and name its sweep.
"""
from shared.stats.claims import Arm, Claim

P0 = "`python -m shared.sweep --config=experiments/gap/table.py:p0 --workdir=runs/gap/p0` (GPU, est. ~25 min)"
FULL = "`python -m shared.sweep --config=experiments/gap/table.py --workdir=runs/gap/table` (GPU, est. 1.5-2 h)"
PAPER_N = "Monet-7B: output text state 546.4x, vision 8.7x the input embedding, after latent SFT too (S2, S3)"
PAPER_E = "EMA norm matching at inference: +2.00 MathVista (S2)"
PAPER_G = "best mean of perception and reasoning aggregates among the supervised variants (no number retrieved)"
PAPER_I = "generated latents beat slot-only placeholders (qualitative)"

TABLES = ["projects/gap/results/table", "projects/gap/results/p0"]   # the full table once committed, else P0


def _norm_claim(id, text, arm, value, bound, direction, note=""):
    """A norm criterion of claim N: the arm's per-seed value against a fixed bound (one-sample t over seeds)."""
    return Claim.once_run(id, text, results=TABLES, not_run=P0, a=Arm({"arm": arm}, value, arm), b=bound,
                          direction=direction, paired=False, paper=PAPER_N, note=note)


CLAIMS = [
    # stage A's norm report is copied into each of its points (stageA/*); T0's rows give one value per seed
    _norm_claim("N (after A, ratio)", "After stage A, r_vis = ||N_f(h_L)|| / ||e_vis|| at image positions (the "
                "state B0 feeds) is >= 3", "T0", "stageA/norms/r_vis_post", 3.0, "greater"),
    _norm_claim("N (after A, depth)", "After stage A, the median ||h_l|| at text positions grows with depth "
                "(Spearman >= 0.9)", "T0", "stageA/norms/spearman_text", 0.9, "greater",
                note="both seeds are above the bound, but two seeds give a t interval with 1 degree of freedom; "
                     "the full table's 3 seeds decide"),
    _norm_claim("N (after B, B0)", "After stage B, B0's fed-latent ratio ||u|| / ||e_vis|| is still >= 3", "B0",
                "norms/r_fed", 3.0, "greater"),
    _norm_claim("N (after B, G low)", "G's fed latents are at least 0.5 x ||e_vis||", "G", "norms/r_fed", 0.5,
                "greater"),
    _norm_claim("N (after B, G high)", "G's fed latents are at most 2 x ||e_vis||", "G", "norms/r_fed", 2.0, "less"),
    _norm_claim("N (after B, G subspace)", "G's fed latents lie in stage A's e_vis subspace: rho >= 0.95", "G",
                "norms/rho", 0.95, "greater"),
    Claim("E", "B0 + EMA rescaling at inference beats B0 on R in all 3 seeds (no training)", paper=PAPER_E,
          not_run=FULL),
    Claim("G (Agg)", "Agg(G) - Agg(B0) >= 3 points (3-seed mean) and > 2 pooled seed std", paper=PAPER_G,
          not_run=FULL),
    Claim("G (stability)", "The seed std of R for G is <= B0's", paper=PAPER_G, not_run=FULL),
    Claim("G (perception)", "P of G is no more than 1 point below T0's", paper=PAPER_G, not_run=FULL),
    Claim("G (components)", "At least 2 of G-F, G-C, G-K are below G on Agg by > 1 seed std",
          paper="each of PCA head, curated latent supervision and difficulty-aware assignment contributes (S)",
          not_run=FULL),
    Claim("I (placeholders)", "G's generated latents beat the best placeholder (zeros, noise, mean, swap) by >= 5 "
          "points on R", paper=PAPER_I, not_run=FULL),
    Claim("I (swap)", "Swap donor agreement >= 50% for G and higher than B0's", paper=PAPER_I, not_run=FULL),
    Claim("I (oracle)", "Oracle v* latents >= the generated ones on R for G", paper=PAPER_I, not_run=FULL),
]
