"""TASKS "dir_debias/rm": the shared RM training (shared.rm) for each seed of dir.seeds in turn, in
<workdir>/seed<k> (each a complete RM run with config.json, checkpoints and summary.json, loadable as the reward
"model/scalar_rm"), followed by the spec's section-4.4 evaluation of that RM:

    eval/<split>/accuracy                    pairwise accuracy on aligned / balanced / anti (shared.rm)
    eval/bias_gap                            accuracy(aligned) - accuracy(anti)
    eval/<split>/spearman_dr_dv, pearson_dr_dv   of r_w - r_l against v_w - v_l (first attribute's values)
    eval/<split>/spearman_r_v                of r against v over every response of the split
    probe/linear_acc, probe/mlp_acc, probe/majority   fresh probes on frozen z predicting the first attribute
                                             (dir.probe_split, trained on one half, scored on the other)
    mi/club, mi/infonce, mi/mine             held-out MI estimates of I(z; a) on the same split (nats)
    bon/quality, bon/filler (+ _random, _best)  best-of-n on unbiased synpref candidates (synpref data only)

<workdir>/summary.json holds the mean over seeds under each numeric key, "<key>/std" the standard deviation and,
for eval/, probe/, mi/, bon/ and train/ keys, "per_seed/<key>" the list. Seeds run in one process so one sweep point pays python start-up once; the persistent
XLA cache (dir.compile_cache) lets seeds after the first skip compilation. A finished seed is not re-run.
"""
from __future__ import annotations

import copy
import json
import math
import os

import jax
import numpy as np

from shared.config import register_validator
from shared.config.loader import ConfigError
from shared.mi import estimate_lower_bound, fit_club, probe_accuracy
from shared.registry import TASKS
from shared.eval.bon import best_of_n
from shared.rm import RM_TASKS, score_rows, score_texts, train_rm
from shared.train.tasks import finished_summary
from shared.train.trainer import write_summary
from projects.dir_debias.attributes import parse_attributes
from projects.dir_debias.debias import pair_representation

TASK = "dir_debias/rm"
RM_TASKS.add(TASK)


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties sharing their average rank."""
    _, inverse, counts = np.unique(np.asarray(x), return_inverse=True, return_counts=True)
    start = np.cumsum(counts) - counts
    return (start + (counts - 1) / 2.0)[inverse]


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    sx, sy = x.std(), y.std()
    return float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy)) if sx > 0 and sy > 0 else 0.0


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    return pearson(rankdata(x), rankdata(y))


def pair_accuracy(diff: np.ndarray) -> float:
    return float(np.where(diff > 0, 1.0, np.where(diff == 0, 0.5, 0.0)).mean())


def debias_metrics(config, trainer, tokenizer, eval_rows: dict) -> dict:
    """The module doc's evaluation of a trained RM (numbers only)."""
    d = config.dir
    attribute = parse_attributes(d)[0][0]
    batch = int(config.train.batch_size) // jax.process_count()
    out, outputs = {}, {}
    for split, rows in eval_rows.items():
        outputs[split] = o = score_rows(trainer, rows, batch)
        diff = o["r_chosen"] - o["r_rejected"]
        if attribute.kind != "label":
            v_w, v_l = (np.asarray(v) for v in attribute.values(rows))
            out[f"eval/{split}/spearman_dr_dv"] = spearman(diff, v_w - v_l)
            out[f"eval/{split}/pearson_dr_dv"] = pearson(diff, v_w - v_l)
            out[f"eval/{split}/spearman_r_v"] = spearman(np.concatenate([o["r_chosen"], o["r_rejected"]]),
                                                         np.concatenate([v_w, v_l]))
    if "aligned" in outputs and "anti" in outputs:
        acc = {s: pair_accuracy(outputs[s]["r_chosen"] - outputs[s]["r_rejected"]) for s in ("aligned", "anti")}
        out["eval/bias_gap"] = acc["aligned"] - acc["anti"]
    if d.probe_split in outputs and d.probe_steps > 0:
        z = np.asarray(pair_representation(outputs[d.probe_split], d.representation))
        a = np.asarray(attribute.labels(eval_rows[d.probe_split]))
        half, k, steps = len(z) // 2, attribute.num_classes, int(d.probe_steps)
        parts = (z[:half], a[:half], z[half:], a[half:])
        linear = probe_accuracy(*parts, k, hidden=0, steps=steps)
        out.update({"probe/linear_acc": linear["accuracy"], "probe/majority": linear["majority"],
                    "probe/mlp_acc": probe_accuracy(*parts, k, hidden=64, steps=steps)["accuracy"],
                    "mi/club": fit_club(*parts, k, hidden=64, steps=steps),
                    "mi/infonce": estimate_lower_bound(*parts, kind="infonce", y_classes=k, steps=steps),
                    "mi/mine": estimate_lower_bound(*parts, kind="mine", y_classes=k, steps=steps)})
    if config.data.source == "dir_debias/synpref" and int(d.bon_prompts) > 0:
        from projects.dir_debias.synpref import bon_candidates

        prompts, candidates, values = bon_candidates(int(d.bon_prompts), int(d.bon_n), seed=0)  # same for every run
        flat_prompts = [p for p, c in zip(prompts, candidates) for _ in c]
        scores = score_texts(trainer, tokenizer, flat_prompts, [x for c in candidates for x in c],
                             int(config.data.seq_len), batch)
        out.update({f"bon/{k}": v for k, v in best_of_n(scores.reshape(len(prompts), -1), values).items()})
    return out


def aggregate(summaries: list[dict], seeds: list[int]) -> dict:
    """Mean over seeds under each numeric key, "<key>/std", "per_seed/<key>"; other keys from the first seed."""
    out = {"seeds": seeds, "n_seeds": len(seeds)}
    for key in summaries[0]:
        values = [s.get(key) for s in summaries]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            finite = [float(v) for v in values if math.isfinite(float(v))]
            out[key] = float(np.mean(finite)) if finite else float("nan")
            out[f"{key}/std"] = float(np.std(finite)) if finite else float("nan")
            if key.startswith(("eval/", "probe/", "mi/", "bon/", "train/")):
                out[f"per_seed/{key}"] = [float(v) for v in values]
        elif key not in out:
            out[key] = values[0] if not isinstance(values[0], bool) else any(values)
    return out


def enable_compile_cache(path: str) -> None:
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def run_seed(config, workdir: str) -> dict:
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "config.json"), "w") as f:  # lets shared.rewards load this RM
        f.write(config.to_json_best_effort(indent=2))
    trainer, tokenizer, eval_rows, summary = train_rm(config, workdir)
    if not summary["diverged"]:
        extra = debias_metrics(config, trainer, tokenizer, eval_rows)
        print(f"[dir_debias] seed {config.seed}: " + ", ".join(f"{k}={v:.4g}" for k, v in extra.items()), flush=True)
        summary.update(extra)
    write_summary(workdir, summary)
    trainer.close()
    return summary


@TASKS.register(TASK)
def dir_rm(config, workdir: str) -> dict:
    done = finished_summary(workdir, config, announce="dir_debias")
    if done is not None:
        return done
    if config.dir.compile_cache:
        enable_compile_cache(os.path.join(workdir, "jax_cache"))
    seeds = [int(s) for s in config.dir.seeds] or [int(config.seed)]
    summaries = []
    for seed in seeds:
        sub = copy.deepcopy(config)
        sub.seed = seed
        sub_dir = os.path.join(workdir, f"seed{seed}")
        summaries.append(finished_summary(sub_dir, sub) or run_seed(sub, sub_dir))
    summary = aggregate(summaries, seeds)
    write_summary(workdir, summary)
    print(f"[dir_debias] {len(seeds)} seeds: " + json.dumps({k: summary[k] for k in summary
                                                             if k.startswith(("eval/", "bon/", "probe/"))
                                                             and "/std" not in k}), flush=True)
    return summary


@register_validator
def check_dir_config(config, mesh_shape) -> None:
    if config.project != "dir_debias" or "dir" not in config:
        return
    try:
        parse_attributes(config.dir)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if config.dir.representation not in ("difference", "concat"):
        raise ConfigError(f"dir.representation={config.dir.representation!r}: expected difference or concat")
    group = int(config.dir.club_batch)
    micro = int(config.train.batch_size) // int(config.train.micro_batches)
    if group and micro % group:
        raise ConfigError(f"dir.club_batch={group} must divide the micro-batch of {micro} pairs")
