"""Proxy-GRM pipeline pieces as single runs (spec ../shared/papers/proxy_grm.md §4.3); the table is
experiments/proxy_grm/table.py. Variants: proxy_sft, proxy_rl (the proxies), grm_sft (the cold start), and
grm_<arm> (arm in B, C, D, E3, E7: GRPO from a cold start, needs --config.train.init_from=run:<grm_sft workdir>
and --config.proxy_grm.proxy_run=<proxy workdir>; launched without them it says so in one line); each with a
"_smoke" twin (8 CPU devices, a minute or more: mostly compilation); the default (no variant) is grm_C.

`:smoke` is the whole pipeline at smoke size as one launch (task "sweep", shared/sweep/task.py): the proxy, the
cold start, then arm C reading both, each in its own folder under the workdir (8.4 min on the 2-core development
machine shared with other jobs, mostly compilation; tests/test_pipeline_smokes.py runs it):

    python -m shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:smoke --workdir=runs/pg

The same three runs by hand (what :smoke runs, stage by stage):

    python -m shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:proxy_sft_smoke --workdir=runs/pg/proxy
    python -m shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:grm_sft_smoke --workdir=runs/pg/sft
    python -m shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:grm_C_smoke --workdir=runs/pg/C \
        --config.train.init_from=run:runs/pg/sft --config.proxy_grm.proxy_run=runs/pg/proxy

`get_sweep()` is that pipeline at full size (`python -m shared.sweep --config=experiments/proxy_grm/smoke_pipeline.py
--workdir=runs/pg_full`), `get_sweep("smoke")` at smoke size.
"""
import ml_collections

from projects.proxy_grm.config import ARMS, grm_rl_config, grm_sft_config, proxy_config
from shared.config.base import base_config

THIS = "experiments/proxy_grm/smoke_pipeline.py"


def get_config(arg=None):
    if arg == "smoke":  # the pipeline: its stages and arm C, as one launch
        c = base_config()
        c.project = "proxy_grm"
        c.task = "sweep"
        c.mesh.preset = "cpu_8"
        c.sweep = ml_collections.ConfigDict(dict(table=f"{THIS}:smoke"))
        return c
    arg = arg or "grm_C"
    smoke = arg.endswith("smoke")
    base = arg[:-len("_smoke")] if arg.endswith("_smoke") else arg
    if base == "grm":
        base = "grm_C"
    if base in ("proxy_sft", "proxy_rl"):
        return proxy_config(base.split("_")[1], smoke)
    if base == "grm_sft":
        return grm_sft_config(smoke)
    if base.startswith("grm_") and base[4:] in ARMS:
        return grm_rl_config(base[4:], smoke)
    raise ValueError(f"{THIS}: unknown variant {arg!r} (known: proxy_sft, proxy_rl, "
                     f"grm_sft, {', '.join('grm_' + a for a in ARMS)}, each also with _smoke; smoke)")


def get_sweep(arg=None):
    """The pipeline: the proxy and the cold start as stages, then GRPO arm C from both."""
    if arg not in (None, "smoke"):
        raise ValueError(f"{THIS}: unknown sweep variant {arg!r} (known: smoke)")
    suffix = "_smoke" if arg == "smoke" else ""
    overrides = {"train.init_from": "run:{stage:sft}", "proxy_grm.proxy_run": "{stage:proxy}"}
    if arg == "smoke":  # evaluator (a) is the training proxy here, so the smoke reports every metric (transfer_a too)
        overrides["proxy_grm.eval_proxy_run"] = "{stage:proxy}"
    return dict(
        name="proxy_grm_pipeline",
        stages=[dict(name="proxy", arg="proxy_sft" + suffix), dict(name="sft", arg="grm_sft" + suffix)],
        points=[dict(name="C", arg="grm_C" + suffix, overrides=overrides)],
        columns=["grm/id_acc_before", "grm/id_acc", "grm/id_rubric_f1", "grm/id_format"],
    )
