"""No RL step compiles after the first: rl.compile_ahead compiles every prompt bucket's programs (sampler, log-prob
passes, update step) and the evaluations' before step 1 (shared/rl/warmup.py); counts are jax's compile events
(shared.metrics.compiles), not timings. Also perf/reward_s apart from perf/rollout_s."""
import jax
import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.data.examples import load_task
from shared.metrics import read_metrics
from shared.rewards import RewardManager
from shared.rl import warmup
from shared.rl.learner import RLLearner

STEPS = 4
FILLER = "Read the numbers and compute. "


def tiny_config(**rl):
    c = base_config()
    c.task = "rl"
    c.model.update(vocab_size=384, d_model=32, n_layers=1, n_heads=2, n_kv_heads=2, head_dim=16, d_ff=64,
                   dtype="float32", remat="none")
    c.mesh.preset = "cpu_1"
    c.rl.task = "rl/arithmetic"
    c.rl.prompts_per_step = 2
    c.rl.group_size = 2
    c.rl.max_new_tokens = 4
    c.rl.rewards = [("task/arithmetic", 1.0)]
    c.rl.kl_coef = 0.05          # the reference pass runs too
    c.rl.eval_every = 3
    c.rl.eval_samples = 0
    c.rl.update(rl)
    c.train.steps = STEPS
    c.train.log_every = 1
    c.train.checkpoint_every = 100
    c.train.progress = False
    c.train.async_checkpoint = False
    c.optim.warmup_steps = 1
    return c


def spread_examples(n: int, seed: int = 0) -> list[dict]:
    """rl/arithmetic examples whose prompts (BOS + bytes) fall in the sampler's buckets 32, 64 and 128 in turn."""
    examples = load_task("rl/arithmetic", "train", n, seed)
    out = []
    for i, e in enumerate(examples):
        target = (20, 50, 100)[i % 3]
        room = max(0, target - len(e["prompt"]))
        out.append(dict(e, prompt=(FILLER * 5)[:room] + e["prompt"]))
    return out


def make_learner(config, workdir):
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    evals = {"test": spread_examples(2, seed=1)[1:2]}     # one eval prompt of bucket 64
    return RLLearner(config, str(workdir), tokenizer, spread_examples(9), evals,
                     RewardManager(list(config.rl.rewards)))


def step_rows(workdir) -> dict[int, dict]:
    return {int(r["step"]): r for r in read_metrics(str(workdir)) if "perf/step_s" in r}


def test_after_compile_ahead_no_step_compiles_though_its_prompts_change_bucket(tmp_path):
    learner = make_learner(tiny_config(), tmp_path / "ahead")
    buckets = warmup.batch_buckets(learner, STEPS)
    assert buckets == [64, 128]   # replayed from the prompt iterator (checked against the steps below)
    ahead = warmup.compile_ahead(learner, STEPS)
    assert ahead["perf/compile_ahead_compiles"] > 0
    assert learner.sampler._decode_jit._cache_size() == 3   # buckets 64, 128 (sampled) + the eval's greedy one
    learner.fit()                                           # its own compile-ahead finds everything compiled
    rows = step_rows(tmp_path / "ahead")
    # step 4 is the first to meet bucket 64: without the compile-ahead it would compile that bucket's programs
    assert [rows[s]["perf/prompt_bucket"] for s in range(1, STEPS + 1)] == [128, 128, 128, 64]
    assert [rows[s]["perf/compiles"] for s in range(2, STEPS + 1)] == [0, 0, 0]
    # step 1 compiles only a few eager ops on [rows] arrays (key split, the group filter's max/min/greater)
    assert 0 <= rows[1]["perf/compiles"] <= 8
    for s, row in rows.items():   # the sampler's and the rewards' seconds, apart and within the step's
        assert 0 < row["perf/rollout_s"] and 0 < row["perf/reward_s"]
        assert row["perf/rollout_s"] + row["perf/reward_s"] <= row["perf/rollout_and_reward_s"]
    learner.close()
