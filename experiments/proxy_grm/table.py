"""Proxy-GRM on RubricWorld (spec ../shared/papers/proxy_grm.md §4): conditions A-F of §4.4, 3 seeds, metrics of §4.5,
judged against §4.6 in projects/proxy_grm/README.md.

Per seed, stages (every arm of a seed starts from the same ones):
  proxy_sft_s<k>   Proxy-SFT: rubric-only classifier, cross-entropy on 1.5k "correct" teacher pairs, 600 steps
  proxy_rl_s<k>    Proxy-RL: same model, REINFORCE on 3k pairs, 3000 steps                      (full table only)
  proxy_a_s<k>     unseen evaluator (a): Proxy-SFT with another seed (k + 1000), width (d 96) and data stream
  grm_sft_s<k>     GRM cold start: SFT on 3k "correct" teacher traces, 2000 steps (d 256, 4 layers, 4 heads)
The teacher data is RubricWorld's deterministic generator (projects/proxy_grm/rubricworld.py): each consumer
draws its own stream, so no data stage is needed. Points (GRPO from grm_sft_s<k> on the 10k "hard" set, B 64 x
G 8, T 1.0, KL k3 0.01, clip 0.2, lr 3e-5, 300 steps; evaluation on 512 ID and 512 OOD pairs):
  A   SFT only (0 RL steps: the evaluation of the cold start)
  B   r_acc + 0.5 r_fmt (answer-only); r_proxy (Proxy-SFT) is scored and logged with weight 0
  C   r_acc + r_proxy + 0.5 r_fmt with Proxy-SFT (Proxy-GRM)
  D   C with Proxy-RL                                                                           (full table only)
  E3  gated use_fb3, E7 gated use_fb7 (shared.rewards.compose.GATES)                             (full table only)
  F   C with 1/4 of the GRM-RL data (2.5k pairs)                                                (full table only)

    # the smallest table that tests claims 1-2 (A, B, C x 3 seeds; 9 stages + 9 points):
    python -m shared.sweep --config=experiments/proxy_grm/table.py:small --workdir=runs/proxy_grm/small --parallel=12
    # GRPO learning rate (spec §4.3 {1e-5, 3e-5, 1e-4}; arms B, C, seed 0: 3 stages + 6 points):
    python -m shared.sweep --config=experiments/proxy_grm/table.py:lr --workdir=runs/proxy_grm/lr --parallel=12
    # claims 1-2 on the harder RubricWorld (type_inference="combo"; arms A, B, C x 3 seeds, 400-step cold starts;
    # 9 stages + 9 points; ~4-5 min wall on 4 H100s, not measured):
    python -m shared.sweep --config=experiments/proxy_grm/table.py:hard --workdir=runs/proxy_grm/hard --parallel=12
    # the hard table's RL arms B, C at the top of §4.3's lr range (1e-4): at 3e-5 neither arm moved the rubric
    # (7.1 min wall on 1 H200 for :hard with --parallel=9):
    python -m shared.sweep --config=experiments/proxy_grm/table.py:hard_lr --workdir=runs/proxy_grm/hard_lr --parallel=9
    # the hard table at lr 1e-4 with proxies that must read the rubric (counterfactual rubric rows, README "A proxy
    # that reads the rubric"); arms A, B, C x 3 seeds, 9 stages + 9 points, ~7-8 min on one H200:
    python -m shared.sweep --config=experiments/proxy_grm/table.py:hard_cf --workdir=runs/proxy_grm/hard_cf --parallel=9
    # hard_cf with proxies trained on 12k pairs for 2400 steps instead of the spec's 1.5k / 600 (their accuracy with
    # the true rubric was 0.68-0.79 in hard_cf; README "A proxy that reads the rubric"):
    python -m shared.sweep --config=experiments/proxy_grm/table.py:hard_cf_big --workdir=runs/proxy_grm/hard_cf_big --parallel=9
    # every arm of §4.4 (A-F x 3 seeds: 12 stages + 21 points) in hard_cf_big's setup (Proxy-RL at the spec's
    # ratios to Proxy-SFT: 24k pairs, 12,000 steps):
    python -m shared.sweep --config=experiments/proxy_grm/table.py:hard_cf_big_full --workdir=runs/proxy_grm/hard_cf_big_full --parallel=12
    # the whole of §4.4 (12 stages + 21 points):
    python -m shared.sweep --config=experiments/proxy_grm/table.py --workdir=runs/proxy_grm/table --parallel=16

Cost estimate (not measured on GPU yet; from the CLIPO table's 0.43 s per RL step of a same-size policy on one
H200): a proxy stage ~0.5-1 min, a cold start ~1-1.5 min, an RL point ~3-4 min (300 steps + 4 evaluations of
512 pairs) with 3 points per GPU. small: ~6-9 min wall on 4 H100s (~25-35 GPU-min); full: ~12-16 min wall on
4 H100s (~55-65 GPU-min). Lower --config.train.steps for a quicker look (it applies to the stages too, so
prefer the variants).
"""
import re

from projects.proxy_grm.config import ARMS, grm_rl_config, grm_sft_config, proxy_config, world_overrides

SEEDS = (0, 1, 2)
# get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
SWEEP_VARIANTS = ("small", "lr", "coldstart", "hard", "hard_smoke", "hard_lr", "hard_cf", "hard_cf_big",
                  "hard_cf_big_full")
LRS = (1e-5, 3e-5, 1e-4)          # spec §4.3's GRPO learning-rate sweep (variant "lr": arms B, C, seed 0)
SMALL_ARMS = ("A", "B", "C")
FULL_ARMS = ("A", "B", "C", "D", "E3", "E7", "F")
EVAL_A_SEED_OFFSET = 1000
COLUMNS = [f"grm/{s}_{m}" for m in ("acc", "rubric_f1", "transfer_a", "transfer_b", "style_rate", "consistency")
           for s in ("id", "ood")] + [
    *(f"grm/{s}_sampled_{m}" for s in ("id", "ood") for m in ("acc", "rubric_f1", "transfer_a", "transfer_b")),
    "grm/id_sampled_style_rate", "grm/id_rubric_p", "grm/id_rubric_r", "grm/id_weight_exact", "grm/id_format", "grm/id_proxy_acc",
    "grm/id_acc_before", "grm/ood_acc_before", "grm/id_transfer_a_before", "grm/id_rubric_f1_before",
    "proxy/acc_gold", "proxy/acc_wrong_type", "proxy/acc_corrupt", "proxy/sensitivity", "proxy/acc_style_only",
    "rl/reward_mean", "wall_time_s"]


def get_config(arg=None):
    """Variants (each also "<variant>_smoke"): grm_<arm> (default grm_C), proxy_sft, proxy_rl, proxy_a, grm_sft.
    "smoke" alone is the smoke table as one launch (task "sweep": its stages, then arms A, B, C)."""
    if arg == "smoke":
        import ml_collections

        from shared.config.base import base_config

        c = base_config()
        c.project, c.task, c.mesh.preset = "proxy_grm", "sweep", "cpu_8"
        c.sweep = ml_collections.ConfigDict(dict(table="experiments/proxy_grm/table.py:smoke"))
        return c
    arg = arg or "grm_C"
    smoke = arg == "smoke" or arg.endswith("_smoke")
    base = "grm_C" if arg == "smoke" else arg[:-len("_smoke")] if arg.endswith("_smoke") else arg
    if base in ("proxy_sft", "proxy_rl"):
        return proxy_config(base[len("proxy_"):], smoke)
    if base == "proxy_a":   # evaluator (a): another width and data stream (its seed comes from the stage)
        c = proxy_config("sft", smoke, d_model=32 if smoke else 96)
        c.proxy_grm.proxy.stream = "proxy_eval_a"
        return c
    if base == "grm_sft":
        return grm_sft_config(smoke)
    if base.startswith("grm_") and base[4:] in ARMS:
        return grm_rl_config(base[4:], smoke)
    raise ValueError(f"experiments/proxy_grm/table.py: unknown variant {arg!r} (known: grm_<arm> for arm in "
                     f"{', '.join(ARMS)}; proxy_sft, proxy_rl, proxy_a, grm_sft; each with _smoke)")


def _point(arm: str, seed: int, suffix: str, smoke: bool) -> dict:
    rl_arm = {"A": "B", "F": "C"}.get(arm, arm)
    proxy = "proxy_rl" if arm == "D" else "proxy_sft"
    overrides = {"seed": seed, "train.init_from": f"run:{{stage:grm_sft_s{seed}}}",
                 "proxy_grm.proxy_run": f"{{stage:{proxy}_s{seed}}}",
                 "proxy_grm.eval_proxy_run": f"{{stage:proxy_a_s{seed}}}"}
    if arm == "A":
        overrides["train.steps"] = 0
    if arm == "F":
        overrides["rl.n_train"] = 8 if smoke else 2500
    return dict(name=f"{arm}_s{seed}", arg=f"grm_{rl_arm}{suffix}", arm=arm, overrides=overrides)


def get_sweep(arg=None):
    if arg == "lr":
        return _lr_sweep()
    if arg == "coldstart":
        return _coldstart_sweep()
    if arg in ("hard", "hard_smoke"):
        return _hard_sweep(smoke=arg == "hard_smoke")
    if arg == "hard_lr":
        return _hard_lr_sweep()
    if arg == "hard_cf":
        return _hard_cf_sweep()
    if arg in ("hard_cf_big", "hard_cf_big_full"):
        return _hard_cf_big_sweep(full=arg == "hard_cf_big_full")
    if arg not in (None, "small", "smoke"):
        raise ValueError(f"experiments/proxy_grm/table.py: unknown sweep variant {arg!r} (known: small, lr, coldstart, "
                         f"hard, hard_smoke, hard_lr, hard_cf, hard_cf_big, hard_cf_big_full, smoke)")
    smoke = arg == "smoke"
    suffix = "_smoke" if smoke else ""
    seeds = SEEDS[:1] if smoke else SEEDS
    arms = FULL_ARMS if arg is None else SMALL_ARMS
    stages = []
    for seed in seeds:
        stages.append(dict(name=f"proxy_sft_s{seed}", arg="proxy_sft" + suffix, overrides={"seed": seed}))
        if "D" in arms:
            stages.append(dict(name=f"proxy_rl_s{seed}", arg="proxy_rl" + suffix, overrides={"seed": seed}))
        stages.append(dict(name=f"proxy_a_s{seed}", arg="proxy_a" + suffix,
                           overrides={"seed": seed + EVAL_A_SEED_OFFSET}))
        stages.append(dict(name=f"grm_sft_s{seed}", arg="grm_sft" + suffix, overrides={"seed": seed}))
    points = [_point(arm, seed, suffix, smoke) for arm in arms for seed in seeds]
    return dict(name="proxy_grm_small" if arg == "small" else "proxy_grm_table", stages=stages, points=points,
                group=["arm"], columns=COLUMNS,
                plot=dict(kind="bars", metric="grm/ood_transfer_b"))


def _lr_sweep():
    """Arms B and C at each lr of LRS, seed 0 (the stages of one seed)."""
    table = get_sweep("small")
    stages = [s for s in table["stages"] if s["name"].endswith("_s0")]
    points = []
    for arm in ("B", "C"):
        for lr in LRS:
            point = _point(arm, 0, "", smoke=False)
            point["name"] = f"{arm}_lr{lr:g}_s0"
            point["overrides"]["optim.lr"] = lr
            points.append(point)
    return dict(name="proxy_grm_lr", stages=stages, points=points, group=["arm", "optim.lr"], columns=COLUMNS,
                plot=dict(kind="curves", metric="rl/reward_mean", x="step", label="optim.lr"))


COLD_START_STEPS = (50, 100, 200)   # variant "coldstart": shorter GRM cold starts (the 2000-step one is at F1 1.0)


def _coldstart_sweep():
    """Arms A, B, C x 3 seeds from cold starts of COLD_START_STEPS steps: the spec's 2000-step cold start already
    writes the true rubric (F1 ~1.0 in the small table), which leaves no room for claim 1; an under-trained cold
    start leaves the rubric to be learned during RL."""
    table = get_sweep("small")
    stages = [s for s in table["stages"] if not s["name"].startswith("grm_sft_")]
    points = []
    for steps in COLD_START_STEPS:
        for seed in SEEDS:
            stages.append(dict(name=f"grm_sft_n{steps}_s{seed}", arg="grm_sft",
                               overrides={"seed": seed, "train.steps": steps, "optim.warmup_steps": steps // 5,
                                          "train.checkpoint_every": steps, "train.eval_every": steps}))
        for arm in SMALL_ARMS:
            for seed in SEEDS:
                point = _point(arm, seed, "", smoke=False)
                point["name"] = f"{arm}_n{steps}_s{seed}"
                point["overrides"]["train.init_from"] = f"run:{{stage:grm_sft_n{steps}_s{seed}}}"
                point["arm"] = f"{arm}_n{steps}"
                points.append(point)
    return dict(name="proxy_grm_coldstart", stages=stages, points=points, group=["arm"],
                columns=COLUMNS, plot=dict(kind="bars", metric="grm/id_sampled_rubric_f1"))


HARD_WORLD = "combo"           # variant "hard": RubricWorld whose task type needs the whole keyword triple
HARD_COLD_START_STEPS = 400    # CPU check (README "Hard variant"): rubric F1 flat at ~0.77, verdict above chance by 400


def _hard_sweep(smoke: bool = False, full: bool = False):
    """Arms A, B, C (full: A-F) x 3 seeds (smoke: seed 0) on the HARD_WORLD RubricWorld
    (rubricworld.TYPE_INFERENCES): the spec world's rubric is a keyword lookup that every cold start writes
    perfectly, so claim 1 has no room there; here the rubric needs the whole prompt and a
    HARD_COLD_START_STEPS-step cold start writes imperfect ones.
    Every stage and point carries the world's overrides (proxy data, cold-start data, RL data, evaluation)."""
    table = get_sweep("smoke" if smoke else (None if full else "small"))
    world = world_overrides(HARD_WORLD)
    stages = []
    for stage in table["stages"]:
        stage = dict(stage, name=f"{stage['name']}_{HARD_WORLD}", overrides={**stage["overrides"], **world})
        if stage["name"].startswith("grm_sft_") and not smoke:
            steps = HARD_COLD_START_STEPS
            stage["overrides"].update({"train.steps": steps, "optim.warmup_steps": steps // 5,
                                       "train.checkpoint_every": steps, "train.eval_every": steps})
        stages.append(stage)
    points = []
    for point in table["points"]:
        overrides = {k: re.sub(r"\{stage:([^}]+)\}", rf"{{stage:\1_{HARD_WORLD}}}", v) if isinstance(v, str) else v
                     for k, v in point["overrides"].items()}
        points.append(dict(point, name=f"{point['arm']}_{HARD_WORLD}_s{overrides['seed']}",
                           overrides={**overrides, **world}))
    return dict(name=f"proxy_grm_hard{'_smoke' if smoke else ''}", stages=stages, points=points, group=["arm"],
                columns=COLUMNS, plot=dict(kind="bars", metric="grm/id_rubric_f1"))


HARD_LR = 1e-4   # variant "hard_lr": §4.3's largest GRPO lr


def _hard_lr_sweep():
    """Arms B and C of the hard table at lr HARD_LR: at the default 3e-5 the rubric F1 stayed at the cold start's
    0.78 in both RL arms (results/hard), so the proxy reward had nothing to act on; a larger step tests whether
    RL here can move the rubric at all."""
    table = _hard_sweep()
    points = []
    for point in table["points"]:
        if point["arm"] in ("B", "C"):
            points.append(dict(point, name=f"{point['arm']}_{HARD_WORLD}_lr{HARD_LR:g}_s{point['overrides']['seed']}",
                               overrides={**point["overrides"], "optim.lr": HARD_LR}))
    return dict(table, name="proxy_grm_hard_lr", points=points)


COUNTERFACTUAL = 0.5   # variant "hard_cf": fraction of Proxy-SFT pairs that also appear with another type's rubric


def _hard_cf_sweep(full: bool = False):
    """The hard table (arms A, B, C x 3 seeds) at lr HARD_LR with rubric-reading proxies: both proxies (the training
    proxy and the unseen evaluator (a)) get proxy_grm.proxy.counterfactual = COUNTERFACTUAL, since in the hard world a
    proxy trained on gold rubrics alone judges from the responses and ignores the rubric (results/hard)."""
    table = _hard_sweep(full=full)
    stages = [dict(s, overrides={**s["overrides"], "proxy_grm.proxy.counterfactual": COUNTERFACTUAL})
              if s["name"].startswith("proxy_") else s for s in table["stages"]]
    points = [dict(p, overrides={**p["overrides"], **({"optim.lr": HARD_LR} if p["arm"] != "A" else {})})
              for p in table["points"]]
    return dict(table, name="proxy_grm_hard_cf" + ("_full" if full else ""), stages=stages, points=points)


PROXY_BIG_N, PROXY_BIG_STEPS = 12_000, 2400   # variant "hard_cf_big": Proxy-SFT pairs and steps (spec: 1.5k, 600)
# hard_cf_big_full's Proxy-RL (arm D): the spec's ratios to Proxy-SFT (2x the pairs, 5x the steps: 3k / 3000 against
# 1.5k / 600) at the big size
PROXY_RL_BIG_N, PROXY_RL_BIG_STEPS = 2 * PROXY_BIG_N, 5 * PROXY_BIG_STEPS


def _big_proxy(n: int, steps: int) -> dict:
    return {"proxy_grm.proxy.n_train": n, "train.steps": steps, "train.checkpoint_every": steps,
            "train.eval_every": steps // 4}


def _hard_cf_big_sweep(full: bool = False):
    """hard_cf with both proxies trained on PROXY_BIG_N pairs for PROXY_BIG_STEPS steps (our departure from the
    spec's 1.5k pairs): in hard_cf the proxies judge only 0.68-0.79 of pairs right with the true rubric, and on 1.5k
    pairs a longer Proxy-SFT overfits (README "A proxy that reads the rubric"), so r_proxy is too noisy to pull the
    rubric towards the truth. full: every arm of §4.4 (A-F; Proxy-RL at PROXY_RL_BIG_N / PROXY_RL_BIG_STEPS)."""
    table = _hard_cf_sweep(full=full)
    def big(name):
        if name.startswith("proxy_rl_"):
            return _big_proxy(PROXY_RL_BIG_N, PROXY_RL_BIG_STEPS)
        return _big_proxy(PROXY_BIG_N, PROXY_BIG_STEPS)

    stages = [dict(s, overrides={**s["overrides"], **big(s["name"])}) if s["name"].startswith("proxy_") else s
              for s in table["stages"]]
    return dict(table, name="proxy_grm_hard_cf_big" + ("_full" if full else ""), stages=stages)

