"""Proxy-GRM pipeline pieces as single runs (spec ../shared/papers/proxy_grm.md §4.3); the table is
experiments/proxy_grm/table.py. Variants: proxy_sft, proxy_rl (the proxies), grm_sft (the cold start), and
grm_<arm> (arm in B, C, D, E3, E7: GRPO from a cold start, needs --config.train.init_from=run:<grm_sft workdir>
and --config.proxy_grm.proxy_run=<proxy workdir>); each with a "_smoke" twin (8 CPU devices, seconds); the
default (no variant) is grm_C.

    python -m shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:proxy_sft_smoke --workdir=runs/pg/proxy
    python -m shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:grm_sft_smoke --workdir=runs/pg/sft
    python -m shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:grm_C_smoke --workdir=runs/pg/C \
        --config.train.init_from=run:runs/pg/sft --config.proxy_grm.proxy_run=runs/pg/proxy
"""
from projects.proxy_grm.config import ARMS, grm_rl_config, grm_sft_config, proxy_config


def get_config(arg=None):
    arg = arg or "grm_C"
    smoke = arg.endswith("smoke")
    base = arg[:-len("_smoke")] if arg.endswith("_smoke") else "" if arg == "smoke" else arg
    if base in ("", "grm"):
        base = "grm_C"
    if base in ("proxy_sft", "proxy_rl"):
        return proxy_config(base.split("_")[1], smoke)
    if base == "grm_sft":
        return grm_sft_config(smoke)
    if base.startswith("grm_") and base[4:] in ARMS:
        return grm_rl_config(base[4:], smoke)
    raise ValueError(f"experiments/proxy_grm/smoke_pipeline.py: unknown variant {arg!r} (known: proxy_sft, proxy_rl, "
                     f"grm_sft, {', '.join('grm_' + a for a in ARMS)}, each also with _smoke; smoke)")
