"""The config of the J-sim runs (TASKS "evpv_prm/jsim"), shared by experiments/evpv_prm/; no jax import here (the
sweep scheduler loads experiment files).

config.evpv:
  data_path          a GSM8K jsonl (default ../shared/data/gsm8k/test.jsonl, relative to the repository root) or
                     "embedded" (projects/evpv_prm/data/smoke.jsonl, eight problems for the smoke configs)
  n_problems         the first n kept problems (0 = all)
  n_candidates       N candidates per problem (spec: 8)
  p_misread, p_slip  the candidate generator's corruption probabilities (spec §4.3: 0.35, 0.2)
  p_perc, p_ext      the judge's perception noise and the extractor's noise (spec §4.5 grid)
  perception         "problem": one perceived question per problem (default) | "candidate": one per candidate [R]
  history            steps of history the judge sees (spec: 12)
  ks                 BoN@k / Pass@k values of k reported for the unperturbed facts
  corruptions        [] or kinds among "drop", "flip" (spec §4.5 item 3); corruption_ratios: their ratios
"""
from __future__ import annotations

import ml_collections

from shared.config import register_validator
from shared.config.base import base_config

GSM8K_TEST = "../shared/data/gsm8k/test.jsonl"
PERCEPTION = ("problem", "candidate")
CORRUPTIONS = ("drop", "flip")
CORRUPTION_RATIOS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)


def jsim_config(smoke: bool = False) -> ml_collections.ConfigDict:
    c = base_config()
    c.project = "evpv_prm"
    c.task = "evpv_prm/jsim"
    c.mesh.preset = "cpu_1"
    c.evpv = ml_collections.ConfigDict({
        "data_path": "embedded" if smoke else GSM8K_TEST, "n_problems": 0, "n_candidates": 8, "p_misread": 0.35,
        "p_slip": 0.2, "p_perc": 0.2, "p_ext": 0.05, "perception": "problem", "history": 12,
        "ks": [1, 2, 4, 8], "corruptions": [], "corruption_ratios": list(CORRUPTION_RATIOS)})
    return c


@register_validator
def check_evpv(config, mesh_shape) -> None:
    """config.evpv: probabilities in [0, 1], a known perception mode and corruption kinds, k within 1..N."""
    if "evpv" not in config:
        return
    e = config.evpv
    for key in ("p_misread", "p_slip", "p_perc", "p_ext"):
        if not 0.0 <= e[key] <= 1.0:
            raise ValueError(f"evpv.{key}={e[key]}: must be in [0, 1]")
    if e.perception not in PERCEPTION:
        raise ValueError(f"evpv.perception={e.perception!r}: must be one of {', '.join(PERCEPTION)}")
    if e.n_candidates < 1 or e.history < 0 or e.n_problems < 0:
        raise ValueError(f"evpv.n_candidates={e.n_candidates} / history={e.history} / n_problems={e.n_problems}: "
                         f"must be >= 1 / >= 0 / >= 0")
    bad_k = [k for k in e.ks if not 1 <= k <= e.n_candidates]
    if bad_k or not list(e.ks):
        raise ValueError(f"evpv.ks={list(e.ks)}: each k must be in 1..evpv.n_candidates={e.n_candidates}")
    unknown = [k for k in e.corruptions if k not in CORRUPTIONS]
    if unknown:
        raise ValueError(f"evpv.corruptions={list(e.corruptions)}: unknown {unknown} (known: {', '.join(CORRUPTIONS)})")
    if any(not 0.0 <= r <= 1.0 for r in e.corruption_ratios) or (list(e.corruptions) and len(e.corruption_ratios) < 2):
        raise ValueError(f"evpv.corruption_ratios={list(e.corruption_ratios)}: ratios in [0, 1], at least 2 with "
                         f"corruptions")
