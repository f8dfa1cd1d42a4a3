"""The claims of the SiameseNorm ledger (spec §5.5), as data for `python -m shared.stats.ledger --project siamesenorm`,
which writes the README's ledger table and results/ledger.json.

Every point trains from scratch (no shared warm start), so every interval is Welch's. The metric is eval/loss
(nats/byte at step 800; lower is better). Tables with one seed per configuration (lr_stability, ablation, the L4 and
L32 shapes of depth) give no interval: their claims are "not run yet" until seeded tables exist. The "spec" rows
read the re-run at the spec's design (S, 21M; 3 seeds per cell) once its table is committed, at eval/loss_last3. † marks paper
numbers known only from third-party notes (spec S9).
"""
from shared.stats.claims import Arm, Claim, Level

R = "projects/siamesenorm/results"
LOSS = "eval/loss"


def block(name: str, label: str, layers: int = 8) -> Arm:
    return Arm({"model.block": name, "model.n_layers": layers}, LOSS, label)


SIAMESE, PRE = block("siamesenorm/siamese", "siamese L8"), block("prenorm", "prenorm L8")

SPEC_TABLES = [f"{R}/lr_stability_spec", f"{R}/lr_stability_spec_min"]
SPEC_RUN = ("`python -m shared.sweep --config=experiments/siamesenorm/lr_stability.py:spec_min "
            "--workdir=runs/siamesenorm_spec_min --parallel=8` (GPU, 24 points; campaign entry siamesenorm_spec_min)")


def spec_arm(short: str, lr: float) -> Arm:
    """A cell of the spec-design LR table (its points' arm is block x LR), read at the spec's final loss."""
    return Arm({"arm": f"{short}_lr{lr:g}"}, "eval/loss_last3", f"{short} {lr:g}")


def _spec(id, text, a, b, direction, margin, paper, note="", levels=(), results=None, not_run=SPEC_RUN):
    """A claim on the spec-design tables (default: the LR table): independent runs, so Welch's interval."""
    return Claim.once_run(id, text, results=results or SPEC_TABLES, not_run=not_run, a=a, b=b, direction=direction,
                          margin=margin, paired=False, paper=paper, note=note, levels=levels)


DEPTH_SPEC, ABLATION_SPEC = f"{R}/depth_spec", f"{R}/ablation_spec"
DEPTH_RUN = ("`python -m shared.sweep --config=experiments/siamesenorm/depth.py:spec --workdir=runs/siamesenorm_depth_spec "
             "--parallel=8` (GPU, 24 points; campaign entry siamesenorm_depth_spec)")
ABLATION_RUN = ("`python -m shared.sweep --config=experiments/siamesenorm/ablation.py:spec "
                "--workdir=runs/siamesenorm_ablation_spec --parallel=8` (GPU, 21 points; campaign entry "
                "siamesenorm_ablation_spec)")


def cell(arm: str) -> Arm:
    """A row group of the depth / ablation spec tables (their points' arm), read at the spec's final loss."""
    return Arm({"arm": arm}, "eval/loss_last3", arm)


def depth_gap(shape: str, lr: float):
    """Pre-Norm's final loss minus Siamese's on `shape` (S: 12 blocks, D: 28) at `lr`."""
    return cell(f"pre_{shape}_lr{lr:g}") - cell(f"siamese_{shape}_lr{lr:g}")

SEEDED = "one seed per block at this LR (results/lr_stability); an interval needs seeds per LR"

CLAIMS = [
    Claim("R1 (3e-3)", "At LR 3e-3, Siamese ends below Pre-Norm in val loss by more than 0.01 nat (§5.5 R1)",
          results=f"{R}/depth_lr0.003", a=SIAMESE, b=PRE, direction="less", margin=-0.01, paired=False,
          paper="1.3B PPL 10.57 vs 11.21 at 4e-4 †",
          note="the criterion's 2σ_seed term is not applied: σ_seed comes from these same seeds"),
    Claim("R1 (6e-3)", "At LR 6e-3, Siamese ends below Pre-Norm in val loss by more than 0.01 nat (§5.5 R1)",
          results=f"{R}/depth", a=SIAMESE, b=PRE, direction="less", margin=-0.01, paired=False,
          paper="1.3B PPL 10.43 vs 10.84 at 1e-3 †",
          note="the criterion's 2σ_seed term is not applied: σ_seed comes from these same seeds"),
    Claim("R1 (1.2e-2)", "At LR 1.2e-2, Siamese ends below Pre-Norm by more than 0.01 nat",
          paper="1.3B PPL 10.48 vs 10.89 at 2e-3 †",
          not_run=f"{SEEDED}: `experiments/siamesenorm/lr_stability.py` with seeds"),
    Claim("R1 (2.4e-2)", "At LR 2.4e-2, Siamese ends below Pre-Norm by more than 0.01 nat",
          paper="1.3B PPL 10.48 vs 10.89 at 2e-3 †",
          not_run=f"{SEEDED}: `experiments/siamesenorm/lr_stability.py` with seeds"),
    Claim("R1 (best LR)", "Siamese's best-over-LR val loss beats Pre-Norm's best-over-LR",
          paper="10.43 vs 10.84 †",
          not_run="Pre-Norm's optimum is not bracketed (3e-3 is the lowest LR tried and Pre-Norm improved toward "
                  "it); needs an LR grid below 3e-3 with seeds per LR"),
    Claim("Seeds (3e-3)", "At L8 and LR 3e-3, Siamese ends below Pre-Norm (no margin)", results=f"{R}/depth_lr0.003",
          a=SIAMESE, b=PRE, direction="less", paired=False, paper="—",
          note="Pre-Norm's best LR tried, the lowest of the grid"),
    Claim("Seeds (6e-3)", "At L8 and LR 6e-3, Siamese ends below Pre-Norm (no margin)", results=f"{R}/depth",
          a=SIAMESE, b=PRE, direction="less", paired=False, paper="—",
          note="Siamese's best LR in lr_stability, Pre-Norm's second best"),
    Claim("R2 (Post-Norm)", "At the highest LR, Post-Norm diverges or ends ≥ 0.1 nat worse than at its best LR",
          paper="Post-Norm diverges at 1e-3 and 2e-3 †",
          not_run="one seed per LR (results/lr_stability), unigram-level collapse not recorded as divergence and "
                  "no spike count; needs seeds per LR and the spec's §5.4 divergence flag"),
    Claim("R2 (HybridNorm)", "At the highest LR, HybridNorm (no depth scaling) diverges or ends ≥ 0.1 nat worse "
          "than at its best LR", paper="HybridNorm diverges at 1e-3 and 2e-3 †",
          not_run="one seed per LR (results/lr_stability), collapse not recorded as divergence; needs seeds per "
                  "LR and the spec's §5.4 divergence flag"),
    Claim("R2 (Siamese)", "At the highest LR, Siamese neither diverges nor spikes, grad norm within ~3× of "
          "Pre-Norm's", paper="Siamese 10.48 at 2e-3 †",
          not_run="one seed per LR (results/lr_stability) and no spike count; needs seeds per LR and spike "
                  "counting"),
    # The spec-design tables (S, 21M, 131M tokens; README "The re-run at the spec's design"): the full grid
    # (results/lr_stability_spec) once committed, else the spec's run matrix with seeds (results/lr_stability_spec_min)
    _spec("R1 spec (2e-3)", "On S at LR 2e-3, Siamese ends below Pre-Norm in final val loss (mean of the last 3 "
          "evals) by more than 0.01 nat", spec_arm("siamese", 2e-3), spec_arm("pre", 2e-3), "less", -0.01,
          paper="1.3B PPL 10.48 vs 10.89 at 2e-3 †"),
    _spec("R1 spec (8e-3)", "On S at LR 8e-3, Siamese ends below Pre-Norm in final val loss by more than 0.01 nat",
          spec_arm("siamese", 8e-3), spec_arm("pre", 8e-3), "less", -0.01, paper="spec 5.5 R1: at every LR where "
          "Pre-Norm converges", note="inconclusive when Pre-Norm itself is unstable at 8e-3 in most seeds",
          levels=(Level(1.0, 0.34, "ceiling", arm=Arm({"arm": "pre_lr0.008"}, "eval/unstable", "pre 0.008 unstable")),)),
    _spec("R2 spec (Post-Norm)", "On S, Post-Norm at the highest LR (8e-3) ends >= 0.1 nat worse than at 2e-3",
          spec_arm("post", 8e-3), spec_arm("post", 2e-3), "greater", 0.1, paper="Post-Norm diverges at 1e-3 and "
          "2e-3 †"),
    _spec("R2 spec (HybridNorm)", "On S, HybridNorm at 8e-3 ends >= 0.1 nat worse than at 2e-3",
          spec_arm("hybridnorm", 8e-3), spec_arm("hybridnorm", 2e-3), "greater", 0.1,
          paper="HybridNorm diverges at 1e-3 and 2e-3 †"),
    _spec("R2 spec (Siamese)", "On S, Siamese at 8e-3 ends less than 0.1 nat worse than at 2e-3 (it stays stable)",
          spec_arm("siamese", 8e-3), spec_arm("siamese", 2e-3), "less", 0.1, paper="Siamese 10.48 at 2e-3 †",
          note="the spike counts and grad norms of R2 are in the table's train/spikes and train/grad_norm columns"),
    _spec("R3 spec (2e-3)", "At ~21M and LR 2e-3, the (Pre − Siamese) final-loss gap on D (28 blocks) exceeds that "
          "on S (12 blocks)", depth_gap("D", 2e-3), depth_gap("S", 2e-3), "greater", 0.0,
          paper="gap 1.32 / 2.04 PPL at L = 10 / 80 †", results=[DEPTH_SPEC], not_run=DEPTH_RUN),
    _spec("R3 spec (4e-3)", "At ~21M and LR 4e-3, the (Pre − Siamese) final-loss gap on D exceeds that on S",
          depth_gap("D", 4e-3), depth_gap("S", 4e-3), "greater", 0.0, paper="gap 1.32 / 2.04 PPL at L = 10 / 80 †",
          results=[DEPTH_SPEC], not_run=DEPTH_RUN),
    _spec("Ablation spec (input norm)", "On S at LR 4e-3, dropping input norm raises Siamese-hybrid's final loss",
          cell("siamese_hybrid_no_input_norm"), cell("siamese_hybrid"), "greater", 0.0, paper="10.43 → 10.51 †",
          results=[ABLATION_SPEC], not_run=ABLATION_RUN),
    _spec("Ablation spec (depth scaling)", "On S at LR 4e-3, dropping depth scaling raises Siamese-hybrid's final "
          "loss", cell("siamese_hybrid_no_depth_scaling"), cell("siamese_hybrid"), "greater", 0.0,
          paper="10.43 → 10.68 †", results=[ABLATION_SPEC], not_run=ABLATION_RUN),
    _spec("Ablation spec (HybridNorm)", "On S at LR 4e-3, HybridNorm with depth scaling ends below HybridNorm "
          "without it", cell("hybridnorm_depth_scaling"), cell("hybridnorm"), "less", 0.0,
          paper="diverges; 10.65 with depth scaling †", results=[ABLATION_SPEC], not_run=ABLATION_RUN,
          note="whether the plain HybridNorm runs diverge or spike is in the table's eval/unstable and "
               "train/spikes columns"),
    Claim("R3", "The (Pre − Siamese) loss gap grows with depth at fixed params", paper="gap 1.32 / 2.04 PPL at "
          "L = 10 / 80 †",
          not_run="one seed at L4 and L32 (results/depth); needs seeds per shape: `experiments/siamesenorm/depth.py` "
                  "with seeds at every shape, at Pre-Norm's best LR"),
    Claim("Ablation (input norm)", "Dropping input norm raises Siamese-hybrid's loss", paper="10.43 → 10.51 †",
          not_run="one seed per variant (results/ablation); needs seeds: `experiments/siamesenorm/ablation.py`"),
    Claim("Ablation (depth scaling)", "Dropping depth scaling raises Siamese-hybrid's loss",
          paper="10.43 → 10.68 †",
          not_run="one seed per variant (results/ablation); needs seeds: `experiments/siamesenorm/ablation.py`"),
    Claim("Ablation (HybridNorm)", "HybridNorm without depth scaling is unstable; with depth scaling it trains",
          paper="diverges; 10.65 with depth scaling †",
          not_run="one seed per variant (results/ablation) and collapse not recorded as divergence"),
    Claim("1.3B LM", "Table 1 at paper scale (`experiments/siamesenorm/lm_1p3b.py`)", paper="Table 1 †",
          not_run="needs FineWeb-Edu and about 10k GPU-hours"),
    Claim("390M depth", "The depth study at paper scale (`experiments/siamesenorm/lm_400m.py:L10` … `:L80`)",
          paper="§4.2 †", not_run="not run at paper scale"),
    Claim("Vision", "DeiT / DiT gains", paper="DeiT-S 79.8 → 81.3; DiT-L/4 FID 45.21 → 41.34",
          not_run="not implemented"),
]
