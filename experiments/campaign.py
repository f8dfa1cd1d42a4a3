"""Every table of every project, in the order to run them (cheapest decisive first), with what each costs.

experiments/CAMPAIGN.md is generated from this file (`python -m shared.sweep.campaign
--campaign=experiments/campaign.py --write`; tests/test_campaign.py fails when it is stale). An entry is done when
its `results` folder holds a manifest.json (shared.sweep wrote it; commit, date and wall time are read from there).
`state` is "ready" (the command runs as is) or "needs ...: why" (a setup to build or fix first). Estimates say
`measured` where a finished run or a 2-point probe gave them; est_gpu_min counts GPU-minutes (one GPU busy for one
minute), est_wall_min the wall time on the machine named in the note.
"""

# march setups a later one superseded: resumable, but no claim needs them finished
MARCH_PARKED = "needs a reason to finish: parked behind march_mini_recall_spec (the 4 x 256 model limits the lookup)"

ENTRIES = [
    # -- ran, kept as the record of what a setup gave -------------------------------------------------------------
    dict(name="proxy_grm_small", config="experiments/proxy_grm/table.py:small",
         results="projects/proxy_grm/results/small", parallel=12, est_gpu_min=20, est_wall_min=5, measured=True,
         state="ready", note="rubrics at the ceiling (F1 1.0): claim 1 has no room in the spec world"),
    dict(name="proxy_grm_coldstart", config="experiments/proxy_grm/table.py:coldstart",
         results="projects/proxy_grm/results/coldstart", parallel=18, est_gpu_min=28, est_wall_min=7, measured=True,
         state="ready", note="50-200-step cold starts: rubric still F1 >= 0.95"),
    dict(name="proxy_grm_hard", config="experiments/proxy_grm/table.py:hard",
         results="projects/proxy_grm/results/hard", parallel=9, est_gpu_min=7, est_wall_min=7, measured=True,
         state="ready", note="combo world: rubric F1 0.78, unchanged by RL in both arms (1 H200)"),
    dict(name="proxy_grm_hard_lr", config="experiments/proxy_grm/table.py:hard_lr",
         results="projects/proxy_grm/results/hard_lr", parallel=9, est_gpu_min=7, est_wall_min=7, measured=True,
         state="ready", note="lr 1e-4: the proxy pulls the rubric away from the truth (1 H200)"),
    dict(name="march_mini", config="experiments/march/table.py:mini", results="projects/march/results/mini",
         parallel=8, est_gpu_min=15, est_wall_min=4, measured=True, state="ready",
         note="warm start at the floor (99.5% hallucinated)"),
    dict(name="rl_base_table", config="experiments/rl/base_table.py", results="experiments/rl/results/base_table",
         parallel=20, est_gpu_min=8, est_wall_min=4, measured=True, state="ready", note="lr 1e-4, 5 seeds (2 H100)"),
    dict(name="rl_base_table_lr2e-5", config="experiments/rl/base_table.py:lr2e-5",
         results="experiments/rl/results/base_table_lr2e-5", parallel=12, est_gpu_min=11, est_wall_min=3,
         measured=True, state="ready", note="the spec's lr; its warm starts differ from base_table's (Welch)"),
    dict(name="openrs_e1", config="experiments/openrs/e1_simulation.py", results="projects/openrs/results/e1_simulation",
         parallel=1, est_gpu_min=0, est_wall_min=1.5, measured=True, state="ready", note="CPU only"),
    dict(name="openrs_e2", config="experiments/openrs/e2_rubricworld.py", results="projects/openrs/results/e2_rubricworld",
         parallel=1, est_gpu_min=0, est_wall_min=1.5, measured=True, state="ready", note="CPU only"),
    dict(name="openrs_e2_combo", config="experiments/openrs/e2_rubricworld.py:combo",
         results="projects/openrs/results/e2_combo", parallel=1, est_gpu_min=0, est_wall_min=4.5, measured=True,
         state="ready", note="CPU only; the combo world: the holistic judge off the ceiling (OOD 0.40-0.59)"),
    dict(name="evpv_prm_grid", config="experiments/evpv_prm/grid.py", results="projects/evpv_prm/results/grid",
         parallel=2, est_gpu_min=0, est_wall_min=3, measured=True, state="ready",
         note="CPU only (J-sim, no model): 24 points, 178 s on the loaded 2-core dev machine"),
    dict(name="evpv_prm_corruption", config="experiments/evpv_prm/corruption.py",
         results="projects/evpv_prm/results/corruption", parallel=2, est_gpu_min=0, est_wall_min=2, measured=True,
         state="ready", note="CPU only: DROP/FLIP x 6 ratios in each of 3 points, 108 s on the loaded 2-core dev machine"),
    dict(name="skill_rm_heterojudge", config="experiments/skill_rm/heterojudge.py",
         results="projects/skill_rm/results/heterojudge", parallel=3, est_gpu_min=0, est_wall_min=1, measured=True,
         state="ready", note="CPU only (numpy + the namespace sandbox): skill routes by family; HH within 2 points "
         "of the best single evidence not reproduced"),
    dict(name="skill_rm_heterojudge_lam0", config="experiments/skill_rm/heterojudge.py:lam0",
         results="projects/skill_rm/results/heterojudge_lam0", parallel=3, est_gpu_min=0, est_wall_min=1,
         measured=True, state="ready", note="CPU only; lambda 0: the controller's cost without a price (claim 5)"),
    dict(name="skill_rm_heterojudge_lam0.01", config="experiments/skill_rm/heterojudge.py:lam0.01",
         results="projects/skill_rm/results/heterojudge_lam0.01", parallel=3, est_gpu_min=0, est_wall_min=1,
         measured=True, state="ready", note="CPU only; the cost/accuracy trade-off, no claim reads it"),
    dict(name="trace2skill_evolution", config="experiments/trace2skill/evolution.py",
         results="projects/trace2skill/results/evolution", parallel=2, est_gpu_min=0, est_wall_min=3.6,
         measured=True, state="ready",
         note="CPU only: teacher-agent track (programmatic agents), 5 evolution seeds x every arm; 217 s on the "
         "2-core dev machine"),
    dict(name="trace2skill_evolution_lean", config="experiments/trace2skill/evolution.py:lean",
         results="projects/trace2skill/results/evolution_lean", parallel=2, est_gpu_min=0, est_wall_min=1.8,
         measured=True, state="ready", note="CPU only: 50 evolution tasks instead of 200 (a harder setup for the "
         "support filter); 109 s on the 2-core dev machine"),
    dict(name="atp_mnist_pipeline", config="experiments/atp_mnist/pipeline.py",
         results="projects/atp_mnist/results/pipeline", parallel=2, est_gpu_min=0, est_wall_min=5, state="ready",
         note="CPU only: the programmatic planner zoo on 2,000 test items a seed, 5 seeds (reads "
              "../shared/data/images/mnist_5k); the trained planners and judges are GPU tables not built yet"),
    # -- to run, cheapest decisive first --------------------------------------------------------------------------
    dict(name="proxy_grm_hard_cf", config="experiments/proxy_grm/table.py:hard_cf",
         results="projects/proxy_grm/results/hard_cf", parallel=9, est_gpu_min=10, est_wall_min=5, measured=True,
         state="ready", note="proxies that read the rubric (sensitivity 0.11): C's rubric F1 still falls under RL, "
         "claims 1-2 not reproduced (2 H200s beside openrs_e3_hack, 2026-11-28: 4.8 min wall)"),
    dict(name="proxy_grm_hard_cf_big", config="experiments/proxy_grm/table.py:hard_cf_big",
         results="projects/proxy_grm/results/hard_cf_big", parallel=9, est_gpu_min=12, est_wall_min=6, measured=True,
         state="ready", note="hard_cf with proxies trained on 12k pairs for 2,400 steps (sensitivity 0.32): C still "
         "no better than B in rubric F1, transfer or OOD accuracy, claims 1-2 not reproduced (2 H200s beside "
         "evpv_prm_jlearn, 2026-11-28: 6 min wall)"),
    dict(name="evpv_prm_jlearn", config="experiments/evpv_prm/jlearn.py", results="projects/evpv_prm/results/jlearn",
         parallel=6, est_gpu_min=17, est_wall_min=8.5, measured=True, state="ready",
         note="J-learn: 6 judge SFT stages (4.3M params, 10k steps of 128) + 3 eval points; 2 H200s, 2026-11-28: the "
              "stages ~480 s each, 3 on a GPU, evaluation 10 s. The learned judges reach macro-F1 0.65 but not the "
              "premise check (recall 0.38 against J-sim's 0.98): claims (i) not reproduced"),
    dict(name="evpv_prm_jlearn_pairs", config="experiments/evpv_prm/jlearn.py:pairs",
         results="projects/evpv_prm/results/jlearn_pairs", parallel=6, est_gpu_min=17, est_wall_min=10.5,
         measured=True, state="ready",
         note="J-learn with half of each judge's SFT examples (premise-misread step, clean twin) pairs "
              "(premise_pair_share 0.5): premise recall 0.39 / 0.40, as without pairs (0.38): the judges still do "
              "not learn the lookup, claims (i)-(ii) not reproduced (2 H200s beside writing_zero_c1_long, "
              "2026-11-28: 10.5 min wall over 2 back-to-back calls)"),
    dict(name="march_mini_recall", config="experiments/march/table.py:mini_recall",
         results="projects/march/results/mini_recall", parallel=6, est_gpu_min=21, est_wall_min=10.5, measured=True,
         state="ready",
         note="name-first documents, 3,000-step warm starts (~400 s each): token accuracy 0.97-0.98 and still "
              "rising, but greedy answers 90-99% hallucinated and every MARCH Solver reward -1: inconclusive (no RL "
              "signal). 2 H200s, 2026-11-28: 10.5 min wall over 2 back-to-back calls"),
    dict(name="march_mini_recall_long", config="experiments/march/table.py:mini_recall_long",
         results="projects/march/results/mini_recall_long", parallel=6, est_gpu_min=50, est_wall_min=40,
         state=MARCH_PARKED, stages_at_once=1,
         note="mini_recall with 10,000-step warm starts; stages checkpoint every 500 steps. Measured 2026-11-28 (one "
              "H200 of a 4-GPU host, 3 at once): 9,125 of 10,000 steps in 3 back-to-back 9-minute calls (~1,780 s a "
              "stage), then the lease ran out and the stages were lost. Now a seed at a time (stages_at_once=1: "
              "one warm start trains, its 3 arms run beside the next one), so a lease ends with whole seeds "
              "committed and the next continues from them. 2026-11-29, one H200 beside 3 other tables: the warm "
              "start ran out of GPU memory twice (the other tables' points held the GPU; a sweep requeues only "
              "its own), then trained alone at 1.8M tok/s (~8.5 steps/s: ~20 min a warm start) and reached step "
              "3,699 when the lease ended. 2026-11-29 (2nd), one H200 alone, 3 calls (1,640 s held): seeds 0 and 1 "
              "whole (a warm start ~8.5 min alone at 1.9M tok/s, ~19 steps/s; the 3 arms ~3-4 min beside the next), "
              "seed 2's warm start at step 4,662 when the lease ended. Greedy halluc 0.63, coverage 0.49: above "
              "spec D.2's 0.3-0.5, and the Checker flags nearly every response (reward -0.98): inconclusive; "
              "mini_recall_fresh is the next setup"),
    dict(name="march_mini_recall_fresh", config="experiments/march/table.py:mini_recall_fresh",
         results="projects/march/results/mini_recall_fresh", parallel=6, est_gpu_min=45, est_wall_min=40,
         state=MARCH_PARKED, stages_at_once=1,
         note="mini_recall_long's 10,000 steps over 320k traces (2 passes) instead of 60k (~11): is the lookup short "
              "of data? ~2.5 min of trace generation per warm start, then ~8.5 min of training alone on one H200; "
              "2 seeds a 27-minute lease (measured on mini_recall_long). Check eval/halluc_rate_before (sft arm) in "
              "0.3-0.5 and rl/role/solver/reward_mean above -0.95 first. 2026-11-29 (3rd), one H200 alone, 2 calls: "
              "trace generation + a warm start ~9 min, seed 0 whole, seed 1's warm start at step 1,272 when the "
              "time ran out. Seed 0: greedy halluc 0.69 (mini_recall_long: 0.645 / 0.617), MARCH's reward -0.94: "
              "5x the traces did not help, so the model limits the lookup; mini_recall_spec is the next setup "
              "(seeds 1-2 here only if a ledger interval is wanted)"),
    dict(name="march_mini_recall_spec", config="experiments/march/table.py:mini_recall_spec",
         results="projects/march/results/mini_recall_spec", parallel=6, est_gpu_min=25, est_wall_min=25,
         state="ready", stages_at_once=3,
         note="mini_recall with the spec's 8 x 512 model (D.2) in the warm start (3,000 steps, lr 1e-3) and the RL "
              "points (B = 32, 100 steps). Measured 2026-11-29 (one H200, 6,000-step stages then): 0.13 s/step "
              "alone, 0.33 s/step beside gap_p0; seed 0 reached step 4,790 in three calls and was lost with the "
              "lease (a stage's checkpoint does not come back). Now 3,000 steps and all three seeds' stages at once: "
              "run it alone in a fresh lease, last call with --finish_in_budget. Check eval/halluc_rate_before (sft "
              "arm) in 0.3-0.5 and rl/role/solver/reward_mean above -0.95 first"),
    dict(name="openrs_e3_min", config="experiments/openrs/e3_brpo_writing.py:min",
         results="projects/openrs/results/e3_min", parallel=6, est_gpu_min=9, est_wall_min=9, measured=True,
         state="ready", note="holistic vs rubric_pvr x 3 seeds (1 H200, 2026-11-28: 8 min in one 540 s call): "
         "quality reproduced; the holistic arm's NOTE rate at the floor (0.016). rubric_pvr needs the namespace "
         "sandbox: `namespace_problem()` was None on the H200"),
    dict(name="openrs_e3_hack", config="experiments/openrs/e3_brpo_writing.py:hack",
         results="projects/openrs/results/e3_hack", parallel=9, est_gpu_min=15, est_wall_min=7.5, measured=True,
         state="ready", note="annotator bias 0.6: holistic hacks (NOTE 0.998), rubric_pvr does not (0.005): E3 "
         "reproduced; the biased rubric hacks too (the PVR is no hack detector). 2 H200s, 7.3 min wall; 9 points "
         "on one H200 ran out of memory"),
    dict(name="writing_zero_c1", config="experiments/writing_zero/table.py:c1",
         results="projects/writing_zero/results/c1", parallel=9, est_gpu_min=10, est_wall_min=5, measured=True,
         state="ready", note="C1: BRPO gains 74% of round robin's Q at 400 steps, still rising; R8 does not stall "
         "(2 H200s, 2026-11-28: 4.9 min wall)"),
    dict(name="writing_zero_c1_long", config="experiments/writing_zero/table.py:c1_long",
         results="projects/writing_zero/results/c1_long", parallel=9, est_gpu_min=19, est_wall_min=9.4, measured=True,
         state="ready",
         note="C1 at 1,200 RL steps: BRPO gains 96% of round robin's Q, C1 (quality) reproduced; R8 still does not "
              "stall (2 H200s beside evpv_prm_jlearn_pairs, 2026-11-28: 9.4 min wall over 2 back-to-back calls)"),
    dict(name="writing_zero_c2", config="experiments/writing_zero/table.py:c2",
         results="projects/writing_zero/results/c2", parallel=9, est_gpu_min=9, est_wall_min=4.6, measured=True,
         state="ready", note="C2: R1 on the biased RM loses its Q through length, not the NOTE suffix; R3 holds "
         "(2 H200s, 2026-11-28: 4.6 min wall)"),
    dict(name="writing_zero_c2_8seeds", config="experiments/writing_zero/table.py:c2_8seeds",
         results="projects/writing_zero/results/c2_8seeds", parallel=12, est_gpu_min=17, est_wall_min=25,
         measured=True, state="ready",
         note="C2 at 8 seeds (32 stages + 24 points). One H200 of a 4-GPU host, 2026-11-28: 20.3 min wall in 3 "
              "back-to-back calls (12 at once). R1 hacks (Q falls, proxy rises; through length, not NOTE), R3 "
              "holds, R1 vs R2 reproduced; R2 vs R3 not (R2 spreads)"),
    dict(name="writing_zero_rest", config="experiments/writing_zero/table.py:rest",
         results="projects/writing_zero/results/rest", parallel=8, est_gpu_min=9, est_wall_min=22, measured=True,
         state="ready",
         note="R0, R3, R3n, R4, R5 x 3 seeds (6 stages + 15 points). 1 H200, 2026-11-28, beside "
              "writing_zero_c2_8seeds (5 of 12 slots): 22 min wall over 3 calls. With a learned judge BRPO gains "
              "half of round robin's Q (C1 not reproduced there); R3n = R3"),
    dict(name="proxy_grm_hard_cf_big_full", config="experiments/proxy_grm/table.py:hard_cf_big_full",
         results="projects/proxy_grm/results/hard_cf_big_full", parallel=8, est_gpu_min=11, est_wall_min=11,
         measured=True, state="ready",
         note="conditions A-F x 3 seeds in hard_cf_big's setup (claims 3-5; the spec world's full table would sit at "
              "the rubric ceiling like :small): 12 stages + 21 points, 2.3x hard_cf_big's measured points plus "
              "Proxy-RL stages of 12,000 steps. One H200 of a 4-GPU host, 2026-11-28: 6.5 min at 12 at once (9 points "
              "ran out of GPU memory) + 4.5 min at 4 at once. Claim 4 reproduced (sensitivity, transfer), 3 and 5 "
              "not"),
    dict(name="openrs_e3", config="experiments/openrs/e3_brpo_writing.py", results="projects/openrs/results/e3",
         parallel=6, est_gpu_min=13, est_wall_min=13, measured=True, state="ready",
         note="4 judges x 3 seeds (3 stages + 12 points). One H200 of a 4-GPU host, 2026-11-28: 8.2 min at 8 at "
              "once (5 points ran out of GPU memory) + 3 min at 5: quality reproduced, hack rate at the floor, the "
              "rubric biased on every criterion hacks (NOTE 0.97)"),
    dict(name="gap_p0", config="experiments/gap/table.py:p0", results="projects/gap/results/p0", parallel=6,
         est_gpu_min=27, est_wall_min=27, measured=True, state="ready",
         note="GAP's calibration (spec 4.9 P0): stage A x 2 seeds, then T0, B0 (+ its EMA row), G from each. One "
              "H200, 2026-11-29, three 9-minute calls beside march: stage A 4.5 min (0.095 s/step, host-bound), "
              "stage-B points 4.5-11 min six at once. Stage A P 88 / 80, R 29 / 28 (short of P >= 95); r_vis 0.2: "
              "claim N's premise inverts at this scale"),
    dict(name="gap_table", config="experiments/gap/table.py", results="projects/gap/results/table", parallel=6,
         est_gpu_min=50, est_wall_min=50, state="ready", stages_at_once=3,
         note="The full table (claims E, G, I; N again on 3 seeds): stage A (8,000 steps, after P0) x 3 seeds, then "
              "9 variants x 3 seeds. Estimate from P0's pace (~10 min a round of 6 stage-B points), before the "
              "batch prefetch (gap.prefetch_workers) that should shorten the host-bound steps: two leases of one "
              "H200, whole seeds' points committed per lease (a seed's stage A re-runs in the next lease). Carry "
              ".carry/data/images/mnist_5k"),
    dict(name="evpv_prm_jlearn_long", config="experiments/evpv_prm/jlearn.py:long",
         results="projects/evpv_prm/results/jlearn_long", parallel=6, est_gpu_min=80, est_wall_min=40, state="ready",
         stages_at_once=2,
         note="J-learn with 30k SFT steps (the committed judges underfit); stage checkpoints every 2,000 steps. "
              "Measured 2026-11-28 (one H200 of a 4-GPU host, 6 at once, 270k tok/s each): 20,700 of 30,000 steps "
              "in 3 back-to-back 9-minute calls (~2,350 s a stage), then the lease ran out. Now a seed at a time "
              "(stages_at_once=2: a seed's two judges, then its evaluation), whole seeds committed per lease"),
    dict(name="dir_debias_spec", config="experiments/dir_debias/small_scale.py:spec",
         results="projects/dir_debias/results/small_scale_spec", parallel=12, est_gpu_min=30, est_wall_min=28,
         measured=True, state="ready",
         note="BT warm start per seed (stage), arms continue; 69 points + 11 stages, 4M-param RMs. One H200, 12 at "
              "once, 2026-11-28: 78 of 80 in 3 back-to-back 9-minute calls (~28 min wall); D2 seed 2 (its warm "
              "start lost with the machine) ran again whole on 2026-11-29 with --from_results and "
              "--rerun=warm_hh_s2 (~6 min on one H200 beside 3 tables). DIR at gamma 0.1-0.3 barely moves the D1 "
              "shortcut, gamma 1 collapses: claims 2, 3, 5 not reproduced; on D2 (3 seeds) it lowers the gap "
              "0.85 -> 0.70"),
    dict(name="siamesenorm_ablation_spec", config="experiments/siamesenorm/ablation.py:spec",
         results="projects/siamesenorm/results/ablation_spec", parallel=8, est_gpu_min=70, est_wall_min=17,
         state="ready",
         note="S (21M), LR 4e-3, 7 rows (with 'neither') x 3 seeds; ~3 GPU-min a point from bench/RESULTS.md's "
              "25M-shape tok/s scaled by FLOPs (experiments/siamesenorm/_small.py); 4 H100s"),
    dict(name="siamesenorm_spec_min", config="experiments/siamesenorm/lr_stability.py:spec_min",
         results="projects/siamesenorm/results/lr_stability_spec_min", parallel=8, est_gpu_min=72, est_wall_min=72,
         state="ready",
         note="R1/R2 on the spec's own run matrix (5.3 P0 + HybridNorm): pre, post, siamese, hybridnorm x LR 2e-3, "
              "8e-3 x 3 seeds (24 points, the same runs as siamesenorm_spec's cells of those LRs). ~3 GPU-min a "
              "point by estimate (not measured on the S shape); measure the first lease's points/min on one H200 "
              "at --parallel=8 and correct this row"),
    dict(name="siamesenorm_depth_spec", config="experiments/siamesenorm/depth.py:spec",
         results="projects/siamesenorm/results/depth_spec", parallel=8, est_gpu_min=90, est_wall_min=22,
         state="ready", note="R3: pre vs siamese on S (12 x 384) and D (28 x 256) at 2e-3, 4e-3 x 3 seeds; 4 H100s"),
    dict(name="mdm_variance_spec", config="experiments/mdm_variance/variance.py:spec",
         results="projects/mdm_variance/results/variance_spec", parallel=16, est_gpu_min=160, est_wall_min=40,
         state="ready",
         note="theta0 stages (MDM 20k x 256 rows: check acc/theta0 of theta0_t1_mdm first), V3: 7 methods incl. "
              "standard_2x, multisample2 x T1, T2 x 10 SFT seeds; V1/V2: 6 methods x 5 (T1) / 3 (T2) measurement "
              "seeds; ~125 GPU-min of work, 4 H100s"),
    dict(name="clipo_spec_min", config="experiments/clipo/tinygsm_sym_table.py:spec_min",
         results="projects/clipo/results/spec_min", parallel=10, est_gpu_min=80, est_wall_min=80, state="ready",
         stages_at_once=1,
         note="GRPO and CLIPO x 5 seeds from a shared SFT stage per seed (claims 1-4, paired by seed): clipo_spec's "
              "runs of those two arms, half its cost by the same estimate (~7-8 min a point alone). A seed's stage at "
              "a time, so a short lease ends with whole seeds"),
    dict(name="clipo_spec", config="experiments/clipo/tinygsm_sym_table.py:spec",
         results="projects/clipo/results/spec_table", parallel=16, est_gpu_min=160, est_wall_min=40, state="ready",
         stages_at_once=1,
         note="4 arms x 5 seeds from a shared SFT stage per seed, 300 steps of 64 x 16, 2,000 problems per eval "
              "set; ~7-8 min a point alone (0.8 s/step scaled from the 60-step table's 0.13 s + evaluation), 4 H100s. "
              "A seed's stage at a time (stages_at_once=1), so a short lease of one GPU ends with whole seeds"),
    dict(name="siamesenorm_spec", config="experiments/siamesenorm/lr_stability.py:spec",
         results="projects/siamesenorm/results/lr_stability_spec", parallel=8, est_gpu_min=220, est_wall_min=55,
         state="ready",
         note="R1/R2: pre, post, siamese, hybridnorm x LR 5e-4..8e-3 + siamese_hybrid, deepnorm x 2 LRs, 3 seeds "
              "(72 points, S 21M, 131M tokens each); spikes and collapse counted; 4 H100s"),
    dict(name="ssp_min", config="experiments/ssp/selfplay.py:min", results="projects/ssp/results/min",
         parallel=9, est_gpu_min=150, est_wall_min=40, state="ready",
         note="SSP, solver-only, proposer-only x 3 seeds on 4 H100s (3 points per GPU; one H100: --parallel=4, ~85 "
              "min); the warm start stops at 2-hop 0.35: check warm/stopped_at and eval/acc_h2_before first"),
    dict(name="writing_zero_table", config="experiments/writing_zero/table.py",
         results="projects/writing_zero/results/table", parallel=16, est_gpu_min=150, est_wall_min=30, state="ready",
         note="R0-R8 (+R3n) x 3 seeds on shared stages, 4 H100s; c1, c1_long, c2, c2_8seeds and rest cover its "
              "arms and claims at lower cost, so this one is last"),
    dict(name="skill_rm_agent_judge", config="experiments/skill_rm/agent_judge.py",
         results="projects/skill_rm/results/agent_judge", parallel=1, est_gpu_min=90, est_wall_min=90,
         state="needs a served judge model with tool calling: JUDGE_BASE_URL / JUDGE_MODEL (vLLM "
         "--enable-auto-tool-choice); no weights reachable offline",
         note="settings none/fair/operational x 3 seeds x 600 cases, 32 concurrent; estimate, not measured"),
    dict(name="atp_mnist_zoo", config="experiments/atp_mnist/planners.py",
         results="projects/atp_mnist/results/zoo", parallel=4, est_gpu_min=100, est_wall_min=100, state="ready",
         note="the trained planner zoo: 9 SFT stages (unified S/M/L, 6 other mixtures at M, an under-trained "
              "unified M), 3,000 steps of 64 x 2,048 bytes, then 3 evaluation points (every system answers 2,000 "
              "test items greedily, 512 new bytes; E and plan metrics). Carry ../shared/data/images/mnist_5k in "
              ".carry/data/images/. 2026-11-29 (one H200, 480 s, --parallel=9): 5 of 9 stages ran out of GPU "
              "memory (a step of an M stage allocates 24 GiB, L 41 GiB); the 4 others ran at 230-525k tok/s each "
              "(unified_S: 1,829 of 3,000 steps in ~7.5 min; M stages 800-1,100) and were lost with the lease. "
              "So at most 4 at once on one H200, ~100 GPU-min in all, and the 3 evaluation points need all 9 "
              "stages: the table does not fit one 27-minute lease of one H200 (a 4-GPU lease, or evaluation "
              "points per system). No ledger claim reads it yet (the judges are next), so it runs after the "
              "decisive tables"),
    # -- issue 36's papers: warm-start competence first, then the tables (estimates, not measured) ---------------
    dict(name="base_countdown", config="experiments/base/countdown.py",
         results="experiments/base/results/base_countdown", parallel=9, est_gpu_min=4, est_wall_min=4, state="ready",
         measured=True, note="greedy 0.26 / 0.36 / 0.38 at 500 / 1000 / 2000 steps (1 H200, 4 min): STEPS = 1000"),
    dict(name="base_assistant", config="experiments/base/assistant.py",
         results="experiments/base/results/base_assistant", parallel=6, est_gpu_min=25, est_wall_min=25,
         measured=True, state="ready",
         note="greedy 0.79 / 0.92 at 1000 / 2000 steps (3 seeds): STEPS = 2000. One H200 beside 3 tables, 2026-11-29: 25 min wall over 3 back-to-back calls"),
    dict(name="base_relevance", config="experiments/base/relevance.py",
         results="experiments/base/results/base_relevance", parallel=6, est_gpu_min=17, est_wall_min=9, measured=True,
         state="ready", note="greedy 0.50 / 0.85 / 0.91 / 0.95 at 300 / 600 / 1200 / 2400 steps (2 H200s, "
         "2026-11-28; the 2400-step points on one H200 on 2026-11-29): STEPS = 600"),
    dict(name="base_arithmetic_cot", config="experiments/base/arithmetic_cot.py",
         results="experiments/base/results/base_arithmetic_cot", parallel=6, est_gpu_min=50, est_wall_min=15,
         state="ready", note="9 points (1000/2000/4000 steps x 3 seeds), 352-token greedy eval on ood"),
    dict(name="etr_countdown_min", config="experiments/etr/countdown_table.py:min",
         results="projects/etr/results/countdown_min", parallel=8, est_gpu_min=65, est_wall_min=65, state="ready",
         stages_at_once=2,
         note="GRPO and ETR-full x 5 seeds (criteria 1, 2, 5), no pilots: 5 SFT stages + 10 RL points; estimate "
              "from the full table's (not measured): ~2 min a stage, ~5-6 min a point with its evaluation"),
    dict(name="etr_countdown", config="experiments/etr/countdown_table.py", results="projects/etr/results/countdown",
         parallel=16, est_gpu_min=225, est_wall_min=60, state="ready",
         note="7 arms x 5 seeds + 5 SFT + 5 ETR pilot stages, 4 GPUs, several leases (bundles)"),
    dict(name="mo_table_min", config="experiments/medical_multiobjective/table.py:min",
         results="projects/medical_multiobjective/results/table_min", parallel=8, est_gpu_min=90, est_wall_min=90,
         state="ready", stages_at_once=1,
         note="raw sum, RFN only, RFN + Tri-Factor x 3 seeds (criteria 1-2): 3 SFT stages + 9 RL points; estimate "
              "from the full table's (not measured): ~3-4 min a stage, ~7-12 min a point with calibration and "
              "evaluation"),
    dict(name="mo_table", config="experiments/medical_multiobjective/table.py",
         results="projects/medical_multiobjective/results/table", parallel=8, est_gpu_min=230, est_wall_min=60,
         state="ready",
         note="8 arms x 3 seeds + 3 SFT stages, 4 GPUs; RFN/Tri-Factor arms calibrate on 512 x 8 first"),
    dict(name="mode_balanced_min", config="experiments/mode_balanced/table.py:min",
         results="projects/mode_balanced/results/min", parallel=6, est_gpu_min=60, est_wall_min=60, state="ready",
         stages_at_once=1,
         note="claims 1-3's arms only (sft, lam0, lam0.1, lam1) x 3 seeds, no students: 3 warm starts + 9 RL points "
              "of 400 steps; estimate from the table's (not measured): ~4 min a warm start, ~6-10 min an RL point, "
              "a seed a lease on one H200"),
    dict(name="mode_balanced_table", config="experiments/mode_balanced/table.py",
         results="projects/mode_balanced/results/table", parallel=8, est_gpu_min=180, est_wall_min=60,
         state="ready",
         note="lambda arms x 3 seeds, outcome GRPO + format gate, sft arm, distillation students, 4 GPUs"),
    dict(name="mode_balanced_stepwise", config="experiments/mode_balanced/table.py:stepwise",
         results="projects/mode_balanced/results/stepwise", parallel=8, est_gpu_min=160, est_wall_min=50,
         state="ready", note="Stepwise-GRPO, same arms, 4 GPUs"),
    dict(name="etr_cot_min", config="experiments/etr/cot_table.py:min", results="projects/etr/results/cot_min",
         parallel=8, est_gpu_min=190, est_wall_min=60, state="needs base_arithmetic_cot: set "
         "experiments/base/arithmetic_cot.py STEPS from its competence table",
         note="GRPO and ETR-full x 5 seeds (criteria 1, 2, 5), no pilots: 2/7 of etr_cot's RL points"),
    dict(name="etr_cot", config="experiments/etr/cot_table.py", results="projects/etr/results/cot",
         parallel=16, est_gpu_min=660, est_wall_min=180, state="needs base_arithmetic_cot: set "
         "experiments/base/arithmetic_cot.py STEPS from its competence table",
         note="256-token rollouts, 352-token eval; 4 GPUs over many leases (bundles)"),
]
