"""The claims of the GAP ledger (spec ../shared/papers/gap.md 4.8, "Criteria for reproduced"), as data for
`python -m shared.stats.ledger --project gap`, which writes the README's ledger table and results/ledger.json.

No table has run yet: every claim is "not run yet" and names the sweep that measures it (experiments/gap/table.py;
its columns are the keys of projects/gap/task.py). Once results/<table> exists, each becomes a comparison of arms
(points grouped by "arm" = variant name, paired by seed: every variant of a seed starts from that seed's stage A).
"""
from shared.stats.claims import Claim

P0 = "`python -m shared.sweep --config=experiments/gap/table.py:p0 --workdir=runs/gap/p0` (GPU, est. ~25 min)"
FULL = "`python -m shared.sweep --config=experiments/gap/table.py --workdir=runs/gap/table` (GPU, est. 1.5-2 h)"
PAPER_N = "Monet-7B: output text state 546.4x, vision 8.7x the input embedding, after latent SFT too (S2, S3)"
PAPER_E = "EMA norm matching at inference: +2.00 MathVista (S2)"
PAPER_G = "best mean of perception and reasoning aggregates among the supervised variants (no number retrieved)"
PAPER_I = "generated latents beat slot-only placeholders (qualitative)"

CLAIMS = [
    Claim("N (after A)", "After stage A, r_vis >= 3 for the state B0 feeds (N_f(h_L)) and median ||h_l|| grows "
          "with depth (Spearman >= 0.9)", paper=PAPER_N, not_run=P0),
    Claim("N (after B)", "After stage B, B0's fed-latent ratio ||u|| / ||e_vis|| is still >= 3; G's u lies within "
          "[0.5, 2] x ||e_vis|| with subspace fraction rho >= 0.95", paper=PAPER_N, not_run=P0),
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
