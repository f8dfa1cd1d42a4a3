"""ETR (elastic trust regions, arXiv:2601.03723; spec ../shared/papers/etr.md) and its epsilon-matched control.

rl.policy_loss = "etr": PPO-clip (shared.rl.algorithms.ppo_clip_loss: token ratio, rl.loss_agg, rl.dual_clip, KL)
with a clip width per token, computed once per RL step from the advantages and the group pass rates (`prepare`,
a shared.rl.roles.PolicyLoss) and carried in the update batch as eps_low / eps_high [N,T]:

    micro  m[i,t] = 1 + alpha * phi(|A[i,t]|)                phi = tanh [R] (rl.etr.phi: tanh | linear)
    macro  v_g = 4 Var_g(R') in [0, 1]                       R' = R rescaled from [reward_low, reward_high] to
                                                              [0, 1]; binary rewards: 4 p_g (1 - p_g)
                                                              (rl.etr.macro_stat: variance | bernoulli [R])
           M_g = 1 + beta * (2 v_g - 1)  in [1 - beta, 1 + beta], largest at p_g = 0.5
    width  eps_high = clip(eps0_high * m * M, eps_min, eps_max_high)   (binds where A > 0)
           eps_low  = clip(eps0_low  * m * M, eps_min, eps_max_low)    (binds where A < 0)
    with eps0 = rl.eps_low / rl.eps_high and the knobs of rl.etr (shared/config/base.py etr_config). Switches
    for the spec's [R] readings (defaults first): rl.etr.combine product (eps0 m M) | sum (eps0 (m + M - 1));
    rl.etr.sides both | high (eps_low stays eps0_low) | low (eps_high stays eps0_high); rl.etr.macro explicit
    (above) | implicit ([R-alt]: eps = clip(eps0 (1 + alpha_implicit |R'_i - p_g|), ...): the un-normalised
    advantage, no M and no phi; its extra width summed over a group is proportional to the group's variance).
    alpha = beta = 0 is ppo-clip with eps0; alpha = 0 is macro-only, beta = 0 micro-only. A zero-variance group
    (all correct or all wrong) has A = 0 (m = 1) and v = 0: its widths are clip(eps0 (1 - beta)), which bind
    nothing (its advantages are 0). Like any clip change, ETR acts only off-policy: use rl.mini_batches >= 2 or
    rl.num_iterations >= 2.

Metrics (in each step's row): rl/etr/eps_mean, the effective width: the token mean over masked tokens with A != 0
of the side that binds there (eps_high where A > 0, eps_low where A < 0; the mean of both sides when no token has
A != 0); rl/etr/eps_high_mean (A > 0 tokens), eps_low_mean (A < 0 tokens), eps_p10 / p50 / p90 / min / max of the
effective widths, macro_mean (mean M_g), pass_rate_mean; and per pass-rate bucket b (p = 0, then the
rl.etr.bucket_edges intervals, then p = 1): rl/etr/bucket/<b>/groups (share of the groups), eps_high and
eps_low (token means over its rollouts). Groups without a masked token (DAPO fillers) are left out.

rl.policy_loss = "eps-matched": the epsilon-matched GRPO control (spec D.2): ppo-clip with one symmetric width per
step, eps_low = eps_high = eps_t, replaying a schedule: rl.eps_schedule.values (eps at steps 1, 2, ...) or the
metric rl.eps_schedule.key (default rl/etr/eps_mean) of a logged run (rl.eps_schedule.source: its workdir or
metrics.jsonl); rl.eps_schedule.mode step (the value logged at step t, else at the last logged step before t,
else the first) | running (mean of the values up to t) | constant (the mean of all). Logged as
rl/eps_matched/eps.
"""
from __future__ import annotations

import functools
import os

import jax.numpy as jnp
import numpy as np

from shared.config import register_validator
from shared.config.base import eps_schedule_config, etr_config
from shared.rl import algorithms as alg
from shared.rl.roles import LossContext, register_policy_loss

_ETR_DEFAULTS = etr_config().to_dict()
_SCHEDULE_DEFAULTS = eps_schedule_config().to_dict()
CHOICES = {"phi": ("tanh", "linear"), "combine": ("product", "sum"), "sides": ("both", "high", "low"),
           "macro": ("explicit", "implicit"), "macro_stat": ("variance", "bernoulli")}
SCHEDULE_MODES = ("step", "running", "constant")
WIDTH_FIELDS = ("eps_low", "eps_high")


def _group(rl_cfg, name: str, defaults: dict) -> dict:
    node = None
    if rl_cfg is not None:
        node = rl_cfg.get(name) if isinstance(rl_cfg, dict) else getattr(rl_cfg, name, None)
    if node is None:
        return dict(defaults)
    if hasattr(node, "to_dict"):
        node = node.to_dict()
    return {**defaults, **dict(node)}


def etr_options(rl_cfg=None) -> dict:
    """rl.etr over its defaults, checked."""
    opts = _group(rl_cfg, "etr", _ETR_DEFAULTS)
    for key, allowed in CHOICES.items():
        if str(opts[key]) not in allowed:
            raise ValueError(f"rl.etr.{key}={opts[key]!r}: expected one of {', '.join(allowed)}")
    if not float(opts["reward_high"]) > float(opts["reward_low"]):
        raise ValueError(f"rl.etr.reward_high={opts['reward_high']} must exceed rl.etr.reward_low={opts['reward_low']}")
    if not 0 <= float(opts["eps_min"]) <= min(float(opts["eps_max_high"]), float(opts["eps_max_low"])):
        raise ValueError("rl.etr: need 0 <= eps_min <= eps_max_high, eps_max_low")
    if float(opts["eps_max_low"]) >= 1:
        raise ValueError(f"rl.etr.eps_max_low={opts['eps_max_low']} must be < 1 (the ratio's lower bound 1 - eps)")
    return opts


# ---------------------------------------------------------------------------------------------------- widths


def group_pass_stats(rewards, group_size: int, low: float = 0.0, high: float = 1.0,
                     stat: str = "variance") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p [B], v [B], R' [N]): the rescaled rewards R' = clip((R - low) / (high - low), 0, 1), each group's pass rate
    p = mean R' and its variance level v in [0, 1]: 4 Var(R') (population) or 4 p (1 - p) (bernoulli)."""
    r = np.asarray(rewards, np.float64).reshape(-1)
    g = int(group_size)
    if g < 1 or r.size % g:
        raise ValueError(f"group_size={g} must divide the {r.size} rollouts")
    x = np.clip((r - low) / (high - low), 0.0, 1.0)
    grouped = x.reshape(-1, g)
    p = grouped.mean(axis=1)
    v = 4.0 * grouped.var(axis=1) if stat == "variance" else 4.0 * p * (1.0 - p)
    v = np.where(grouped.max(axis=1) == grouped.min(axis=1), 0.0, v)  # all equal: exactly 0, not rounding
    return p, np.clip(v, 0.0, 1.0), x


def etr_widths(rewards, advantages, mask, group_size: int, rl_cfg=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """(eps_low [N,T], eps_high [N,T], info) of the module's rule; info: p [B], v [B], macro M [B] (explicit),
    rows' group index. Off the mask the widths are eps0."""
    opts = etr_options(rl_cfg)
    eps0_low, eps0_high = float(alg._knob(rl_cfg, "eps_low")), float(alg._knob(rl_cfg, "eps_high"))
    adv = np.asarray(advantages, np.float64)
    mask = np.asarray(mask, np.float64)
    if adv.shape != mask.shape or adv.ndim != 2:
        raise ValueError(f"advantages {adv.shape} and mask {mask.shape} must both be [N, T]")
    g = int(group_size)
    p, v, x = group_pass_stats(rewards, g, float(opts["reward_low"]), float(opts["reward_high"]),
                               str(opts["macro_stat"]))
    if x.size != adv.shape[0]:
        raise ValueError(f"{x.size} rewards for {adv.shape[0]} rollouts")
    rows = np.arange(adv.shape[0]) // g
    info = {"p": p, "v": v, "group": rows}
    if opts["macro"] == "explicit":
        magnitude = np.abs(adv)
        phi = np.tanh(magnitude) if opts["phi"] == "tanh" else magnitude
        micro = 1.0 + float(opts["alpha"]) * phi
        macro = 1.0 + float(opts["beta"]) * (2.0 * v - 1.0)
        info["macro"] = macro
        factor = micro * macro[rows][:, None] if opts["combine"] == "product" else micro + macro[rows][:, None] - 1.0
    else:
        deviation = np.abs(x - p[rows])
        factor = np.broadcast_to((1.0 + float(opts["alpha_implicit"]) * deviation)[:, None], adv.shape)
    eps_min = float(opts["eps_min"])
    high = np.clip(eps0_high * factor, eps_min, float(opts["eps_max_high"]))
    low = np.clip(eps0_low * factor, eps_min, float(opts["eps_max_low"]))
    if opts["sides"] == "high":
        low = np.full(adv.shape, eps0_low)
    elif opts["sides"] == "low":
        high = np.full(adv.shape, eps0_high)
    on = mask > 0
    low = np.where(on, low, eps0_low)
    high = np.where(on, high, eps0_high)
    return low.astype(np.float32), high.astype(np.float32), info


def _bucket_names(edges) -> list[tuple[str, float, float]]:
    bounds = [0.0] + [float(e) for e in edges] + [1.0]
    return [(f"{lo:g}-{hi:g}", lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]


def effective_widths(eps_low, eps_high, advantages, mask) -> np.ndarray:
    """The width that binds on each masked token with A != 0 (eps_high where A > 0, eps_low where A < 0), flat."""
    adv, on = np.asarray(advantages), np.asarray(mask) > 0
    return np.concatenate([np.asarray(eps_high)[on & (adv > 0)], np.asarray(eps_low)[on & (adv < 0)]])


def width_metrics(eps_low, eps_high, advantages, mask, info: dict, edges, prefix: str = "rl/etr/") -> dict:
    """The widths as distributions: overall, by the sign of A, and by pass-rate bucket (see the module)."""
    eps_low, eps_high = np.asarray(eps_low, np.float64), np.asarray(eps_high, np.float64)
    adv, on = np.asarray(advantages), np.asarray(mask) > 0
    active = effective_widths(eps_low, eps_high, adv, mask)
    out = {}
    if active.size:
        out["eps_mean"] = float(active.mean())
        for q in (10, 50, 90):
            out[f"eps_p{q}"] = float(np.percentile(active, q))
        out["eps_min"], out["eps_max"] = float(active.min()), float(active.max())
    else:
        both = np.concatenate([eps_low[on], eps_high[on]])
        out["eps_mean"] = float(both.mean()) if both.size else float("nan")
    for side, where, eps in (("high", adv > 0, eps_high), ("low", adv < 0, eps_low)):
        sel = on & where
        if sel.any():
            out[f"eps_{side}_mean"] = float(eps[sel].mean())
    p = np.asarray(info["p"])
    rows_group = np.asarray(info["group"])
    live = np.zeros(p.size, bool)            # groups with a masked token (not DAPO fillers)
    live[np.unique(rows_group[on.any(axis=1)])] = True
    if not live.any():
        live[:] = True
    if "macro" in info:
        out["macro_mean"] = float(np.mean(np.asarray(info["macro"])[live]))
    out["pass_rate_mean"] = float(p[live].mean())
    buckets = [("0", p <= 0.0)]
    for name, lo, hi in _bucket_names(edges):
        buckets.append((name, (p > lo) & (p <= hi) & (p < 1.0)))
    buckets.append(("1", p >= 1.0))
    for name, groups in buckets:
        groups = groups & live
        out[f"bucket/{name}/groups"] = float(groups.sum() / live.sum())
        rows = groups[rows_group]
        sel = on & rows[:, None]
        if sel.any():
            out[f"bucket/{name}/eps_high"] = float(eps_high[sel].mean())
            out[f"bucket/{name}/eps_low"] = float(eps_low[sel].mean())
    return {prefix + k: v for k, v in out.items()}


def prepare_etr(ctx: LossContext) -> tuple[dict, dict]:
    low, high, info = etr_widths(ctx.rewards, ctx.advantages, ctx.mask, ctx.group_size, ctx.rl_cfg)
    metrics = width_metrics(low, high, ctx.advantages, ctx.mask, info, etr_options(ctx.rl_cfg)["bucket_edges"])
    return {"eps_low": low, "eps_high": high}, metrics


def _needs_widths(name: str, eps_low, eps_high) -> None:
    if eps_low is None or eps_high is None:
        raise ValueError(f"policy loss {name!r} takes its clip widths eps_low/eps_high [N,T] from its prepare step "
                         f"(the RL learner passes them); called directly, pass them")


@register_policy_loss("etr", prepare=prepare_etr, fields=WIDTH_FIELDS)
def etr_loss(logp, logp_old, advantages, mask, rl_cfg=None, *, logp_ref=None, eps_low=None, eps_high=None):
    """ETR: ppo-clip with the per-token widths of `prepare_etr` (the module docstring)."""
    _needs_widths("etr", eps_low, eps_high)
    return alg.ppo_clip_loss(logp, logp_old, advantages, mask, rl_cfg, logp_ref=logp_ref,
                             eps_low=jnp.asarray(eps_low, jnp.float32), eps_high=jnp.asarray(eps_high, jnp.float32))


# ---------------------------------------------------------------------------------------------------- control


def schedule_options(rl_cfg=None) -> dict:
    opts = _group(rl_cfg, "eps_schedule", _SCHEDULE_DEFAULTS)
    if str(opts["mode"]) not in SCHEDULE_MODES:
        raise ValueError(f"rl.eps_schedule.mode={opts['mode']!r}: expected one of {', '.join(SCHEDULE_MODES)}")
    return opts


@functools.lru_cache(maxsize=16)
def _logged_schedule(path: str, key: str, mtime: float) -> tuple[tuple[int, ...], tuple[float, ...]]:
    from shared.metrics import read_metrics

    del mtime  # part of the cache key: a file that grows is read again
    by_step, seen = {}, set()
    for row in read_metrics(path):
        seen.update(row)
        if key in row and row[key] is not None and int(row["step"]) >= 1:
            by_step[int(row["step"])] = float(row[key])   # a repeated step (resume): the last line wins
    if not by_step:
        close = sorted(k for k in seen if k.split("/")[-1] == key.split("/")[-1] or k.startswith("rl/etr"))
        raise ValueError(f"rl.eps_schedule.source={path!r} logs no {key!r} at any step >= 1"
                         + (f" (similar keys: {close})" if close else ""))
    steps = tuple(sorted(by_step))
    return steps, tuple(by_step[s] for s in steps)


def load_schedule(rl_cfg=None) -> tuple[np.ndarray, np.ndarray]:
    """(steps, eps) of rl.eps_schedule: its values at steps 1..n, or its source's logged metric."""
    opts = schedule_options(rl_cfg)
    source = str(opts["source"] or "")
    if source:
        path = os.path.join(source, "metrics.jsonl") if os.path.isdir(source) else source
        if not os.path.exists(path):
            raise ValueError(f"rl.eps_schedule.source={source!r}: no metrics file at {path}")
        steps, values = _logged_schedule(path, str(opts["key"]), os.path.getmtime(path))
        return np.asarray(steps, np.int64), np.asarray(values, np.float64)
    values = [float(v) for v in opts["values"] or []]
    if not values:
        raise ValueError("rl.policy_loss='eps-matched' needs rl.eps_schedule.values or rl.eps_schedule.source")
    return np.arange(1, len(values) + 1), np.asarray(values, np.float64)


def scheduled_eps(step: int | None, rl_cfg=None) -> float:
    """The width of RL step `step` (None: the first) under rl.eps_schedule (see the module)."""
    steps, values = load_schedule(rl_cfg)
    mode = schedule_options(rl_cfg)["mode"]
    if mode == "constant":
        return float(values.mean())
    upto = max(int(np.searchsorted(steps, 1 if step is None else int(step), side="right")), 1)
    return float(values[upto - 1]) if mode == "step" else float(values[:upto].mean())


def prepare_eps_matched(ctx: LossContext) -> tuple[dict, dict]:
    eps = scheduled_eps(ctx.step, ctx.rl_cfg)
    if not 0 < eps < 1:
        raise ValueError(f"eps-matched: the schedule gives eps={eps} at step {ctx.step}; expected 0 < eps < 1")
    width = np.full(np.shape(ctx.mask), eps, np.float32)
    return {"eps_low": width, "eps_high": width.copy()}, {"rl/eps_matched/eps": eps}


@register_policy_loss("eps-matched", prepare=prepare_eps_matched, fields=WIDTH_FIELDS)
def eps_matched_loss(logp, logp_old, advantages, mask, rl_cfg=None, *, logp_ref=None, eps_low=None, eps_high=None):
    """The epsilon-matched control: ppo-clip with the symmetric width of rl.eps_schedule at this step."""
    _needs_widths("eps-matched", eps_low, eps_high)
    return alg.ppo_clip_loss(logp, logp_old, advantages, mask, rl_cfg, logp_ref=logp_ref,
                             eps_low=jnp.asarray(eps_low, jnp.float32), eps_high=jnp.asarray(eps_high, jnp.float32))


@register_validator
def _check_etr_config(config, mesh_shape) -> None:
    """Bad rl.etr / rl.eps_schedule values fail at launch, naming the key."""
    rl = config.get("rl") if hasattr(config, "get") else None
    if rl is None:
        return
    name = rl.get("policy_loss")
    if name == "etr":
        etr_options(rl)
    elif name == "eps-matched":  # the source may be a run that has not happened yet (a sweep's stage)
        opts = schedule_options(rl)
        if not (opts["source"] or list(opts["values"] or [])):
            raise ValueError("rl.policy_loss='eps-matched' needs rl.eps_schedule.values or rl.eps_schedule.source")
