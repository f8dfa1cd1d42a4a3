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

J-learn (spec §4.4, experiments/evpv_prm/jlearn.py): judge_sft_config(arm) is one judge's SFT stage (task "sft" on the
example set "rl/evpv_prm/judge", projects/evpv_prm/judge_data.py); jlearn_eval_config() is the evaluation point (task
"evpv_prm/jlearn_eval") with config.evpv's noise and candidate settings and
config.jlearn:
  plain_run, evpv_run  the two judges' SFT run folders (a table fills them with its stages)
  n_problems           templated evaluation problems (templated_problems("eval", n, 0)), N candidates each
  batch_rows           rows per scoring call
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


# J-learn: the spec's judge (4 layers, d 256) reading byte-level prompts of at most 136 bytes (judge_data)
JUDGE_MODEL = dict(d_model=256, n_layers=4, n_heads=4)
SMOKE_JUDGE_MODEL = dict(d_model=32, n_layers=2, n_heads=2)
JUDGE_SEQ_LEN = 144
JUDGE_ARMS = ("plain", "evpv")
JUDGE_NOISE = ("p_perc", "p_ext", "p_misread", "p_slip", "n_candidates", "history")


def judge_model(c, d_model: int, n_layers: int, n_heads: int) -> None:
    m = c.model
    m.vocab_size = 384                 # 259 byte ids, padded to a multiple of 128
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads = d_model, n_layers, n_heads, n_heads
    m.head_dim, m.d_ff = d_model // n_heads, 4 * d_model
    m.max_seq_len, m.attention, m.remat, m.dtype = JUDGE_SEQ_LEN, "xla", "none", "float32"


def judge_sft_config(arm: str, smoke: bool = False, premise_pair_share: float = 0.0,
                     **model) -> ml_collections.ConfigDict:
    """One J-learn judge: SFT on step examples of `arm` ("plain" | "evpv"), loss on the verdict only; greedy
    accuracy on held-out steps (eval/greedy_accuracy) is its step accuracy. premise_pair_share > 0: that share of the
    examples are (misread step, clean twin) pairs (judge_data); the key is absent at 0, so the committed table's
    stage configs are unchanged."""
    if arm not in JUDGE_ARMS:
        raise ValueError(f"evpv_prm judge arm {arm!r}: expected one of {', '.join(JUDGE_ARMS)}")
    c = base_config()
    c.project, c.task = "evpv_prm", "sft"
    judge_model(c, **{**(SMOKE_JUDGE_MODEL if smoke else JUDGE_MODEL), **model})
    c.train.loss = "sft_xent"
    c.data.tokenizer = "byte"
    c.data.source = "rl/evpv_prm/judge"
    c.data.task_options = ml_collections.ConfigDict(dict(arm=arm, p_perc=0.2, p_ext=0.05, p_misread=0.35, p_slip=0.2,
                                                         n_candidates=8, history=12))
    if premise_pair_share:
        c.data.task_options.premise_pair_share = premise_pair_share
    c.data.seq_len = JUDGE_SEQ_LEN
    c.data.n_train = 200_000
    c.data.greedy_eval_examples = 512
    c.data.greedy_eval_tokens = 2
    c.train.batch_size, c.train.steps = 128, 10_000    # ~6 passes over 200k examples; see the README (J-learn)
    c.train.eval_every, c.train.eval_batches, c.train.checkpoint_every = 1000, 4, 2000
    c.train.log_every = 50
    c.optim.lr, c.optim.warmup_steps, c.optim.weight_decay, c.optim.grad_clip = 1e-3, 200, 0.0, 1.0
    c.mesh.preset = "gpu_1"
    if smoke:
        c.mesh.preset = "cpu_8"
        c.data.n_train, c.data.greedy_eval_examples = 64, 8
        c.train.batch_size, c.train.steps, c.train.eval_every, c.train.checkpoint_every = 16, 3, 3, 3
        c.train.eval_batches, c.train.log_every, c.optim.warmup_steps = 1, 1, 1
    return c


def jlearn_eval_config(smoke: bool = False) -> ml_collections.ConfigDict:
    """The J-learn evaluation point: both judges of a seed on the templated evaluation problems."""
    c = jsim_config(smoke)
    c.task = "evpv_prm/jlearn_eval"
    c.evpv.data_path = "templated"
    c.jlearn = ml_collections.ConfigDict(dict(plain_run="", evpv_run="", n_problems=16 if smoke else 500,
                                              batch_rows=16 if smoke else 512))
    c.mesh.preset = "cpu_8" if smoke else "gpu_1"
    return c


@register_validator
def check_jlearn(config, mesh_shape) -> None:
    """config.jlearn sizes (the runs are checked when the task starts: a table fills them); a judge stage's options."""
    if "jlearn" in config:
        j = config.jlearn
        if j.n_problems < 1 or j.batch_rows < 1:
            raise ValueError(f"jlearn.n_problems={j.n_problems} / batch_rows={j.batch_rows}: must be >= 1")
    if config.get("data") and config.data.get("source") == "rl/evpv_prm/judge":
        options = config.data.get("task_options", {})
        if options.get("arm", "plain") not in JUDGE_ARMS:
            raise ValueError(f"data.task_options.arm={options.get('arm')!r}: expected one of {', '.join(JUDGE_ARMS)}")
        for key in ("p_perc", "p_ext", "p_misread", "p_slip", "premise_pair_share"):
            if key in options and not 0.0 <= options[key] <= 1.0:
                raise ValueError(f"data.task_options.{key}={options[key]}: must be in [0, 1]")


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
