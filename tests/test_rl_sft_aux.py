"""rl.sft_aux (shared/rl/sft_aux.py): at lambda = 1 with the RL loss off, the update's gradient is a separate SFT
step's (sft_xent on the same demonstrations); with both on, gradient accumulation over micro-batches gives the
gradient of rl_loss + lambda * token-mean NLL exactly; the lambda schedule, the loss-token masks; a 2-step RL run
with the stream logs train/sft_nll and checkpoints the stream's position."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import shared.builtin  # noqa: F401
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.data.examples import load_task
from shared.model.transformer import build_model
from shared.rl import sft_aux
from shared.rl.learner import policy_outputs, rl_loss_fn
from shared.rl.roles import policy_loss
from shared.train.sft import build_rows
from shared.train.step import lm_loss_fn


def tiny_config():
    c = base_config()
    c.task = "rl"
    c.model.vocab_size = 384
    c.model.d_model = 32
    c.model.n_layers = 1
    c.model.n_heads = 2
    c.model.n_kv_heads = 2
    c.model.head_dim = 16
    c.model.d_ff = 64
    c.model.dtype = "float32"
    c.model.remat = "none"
    c.mesh.preset = "cpu_1"
    c.rl.task = "rl/arithmetic"
    c.rl.prompts_per_step = 4
    c.rl.group_size = 2
    c.rl.max_new_tokens = 6
    c.rl.n_train = 64
    c.rl.sft_aux.weight = 1.0
    c.rl.sft_aux.batch_size = 4
    return c


@pytest.fixture(scope="module")
def setup():
    config = tiny_config()
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    graphdef, params = nnx.split(build_model(config.model, seed=0))
    demos = load_task("rl/arithmetic", "train", 4, 1)
    return config, tokenizer, graphdef, params, demos


def wrapped_loss(config):
    base = rl_loss_fn(config, "xla")
    return sft_aux.with_sft_loss(base, lambda g, p, rows: policy_outputs(g, p, rows, "xla")[0])


def rl_rows(tokenizer, examples, rng, masked: bool):
    """Rollout-shaped RL rows (the examples' gold completions as the 'samples'), random advantages."""
    rows = sft_aux.encode_rows(tokenizer, examples, 12, 8)
    mask = rows["sft_mask"] * (0.0 if masked else 1.0)
    return {"prompt_tokens": rows["sft_prompt_tokens"], "tokens": rows["sft_tokens"],
            "prompt_lengths": rows["sft_prompt_lengths"], "mask": mask,
            "advantages": rng.normal(size=mask.shape).astype(np.float32) * mask}


def grad_of(loss_fn, graphdef, params, batch):
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    return jax.jit(jax.grad(lambda p: loss_fn(graphdef, p, batch, None)[0]))(params)


def assert_trees_close(a, b, rtol=1e-5, atol=1e-7):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def test_lambda_one_with_rl_off_is_an_sft_step(setup):
    config, tokenizer, graphdef, params, demos = setup
    prompt_width, width = sft_aux.widths(tokenizer, demos, config.rl.sft_aux)
    rl_batch = rl_rows(tokenizer, load_task("rl/arithmetic", "train", 4, 2), np.random.default_rng(0), masked=True)
    batch = sft_aux.add_to_mini_batch(rl_batch, sft_aux.encode_rows(tokenizer, demos, prompt_width, width),
                                      rl_weight=0.0, lam=1.0, multiple=1)
    got = grad_of(wrapped_loss(config), graphdef, params, batch)
    sft_config = tiny_config()
    sft_config.train.loss = "sft_xent"
    rows, counts = build_rows(tokenizer, demos, 32)
    assert counts["examples"] == 4 and counts["truncated"] == 0
    want = grad_of(lm_loss_fn(sft_config, "xla"), graphdef, params, rows)
    assert max(float(jnp.abs(x).max()) for x in jax.tree.leaves(want)) > 1e-3   # a real gradient
    assert_trees_close(got, want)


def test_accumulation_over_micro_batches_is_exact(setup):
    """sum_mb grad(loss_mb * weight_mb) / sum_mb weight_mb (the trainer's accumulation, shared/train/step.py) with
    the scales of the whole mini-batch = grad(rl token-mean loss + lambda * demonstrations' token-mean NLL)."""
    config, tokenizer, graphdef, params, demos = setup
    prompt_width, width = sft_aux.widths(tokenizer, demos, config.rl.sft_aux)
    rl_batch = rl_rows(tokenizer, load_task("rl/arithmetic", "train", 4, 2), np.random.default_rng(1), masked=False)
    rl_batch["mask"][0, 3:] = 0.0                       # uneven token counts across micro-batches
    rl_batch["advantages"] *= rl_batch["mask"]
    lam = 0.3
    demo_rows = sft_aux.encode_rows(tokenizer, demos, prompt_width, width)
    policy = policy_loss(config.rl.policy_loss)
    batch = sft_aux.add_to_mini_batch(rl_batch, demo_rows, sft_aux.rl_weight(policy, config.rl, rl_batch), lam, 2)
    loss_fn = wrapped_loss(config)

    def accumulated(p):
        total, weight = 0.0, 0.0
        for j in range(2):      # the trainer's micro-batch j holds rows j, j + 2, ... (shared/train/step._split_micro)
            mb = {k: jnp.asarray(v[j::2]) for k, v in batch.items()}
            loss, metrics = loss_fn(graphdef, p, mb, None)
            total, weight = total + loss * metrics["weight"], weight + metrics["weight"]
        return total / weight

    def reference(p):
        rl_only = {k: jnp.asarray(v) for k, v in rl_batch.items()}
        rl_loss = rl_loss_fn(config, "xla")(graphdef, p, rl_only, None)[0]
        demo = {"prompt_tokens": demo_rows["sft_prompt_tokens"], "tokens": demo_rows["sft_tokens"],
                "prompt_lengths": demo_rows["sft_prompt_lengths"], "mask": demo_rows["sft_mask"]}
        logp = policy_outputs(graphdef, p, {k: jnp.asarray(v) for k, v in demo.items()}, "xla")[0]
        return rl_loss + lam * -jnp.sum(logp) / demo_rows["sft_mask"].sum()

    (got_loss, got), (want_loss, want) = [jax.jit(jax.value_and_grad(f))(params) for f in (accumulated, reference)]
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=1e-5)
    assert_trees_close(got, want)


def test_schedule_loss_tokens_and_padding():
    c = tiny_config()
    c.rl.sft_aux.weight = 0.2
    assert sft_aux.weight_at(c.rl, 7, 10) == 0.2
    c.rl.sft_aux.schedule = "linear"
    assert [round(sft_aux.weight_at(c.rl, s, 4), 6) for s in (1, 2, 3, 4)] == [0.2, 0.15, 0.1, 0.05]
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]], np.float32)
    np.testing.assert_array_equal(sft_aux.loss_token_mask(mask, "first"), [[1, 0, 0, 0], [1, 0, 0, 0]])
    np.testing.assert_array_equal(sft_aux.loss_token_mask(mask, "rest"), [[0, 1, 1, 0], [0, 0, 0, 0]])
    rows = {"sft_tokens": np.ones((3, 4), np.int32), "sft_mask": np.ones((3, 4), np.float32)}
    padded = sft_aux.pad_rows(rows, 4)
    assert padded["sft_tokens"].shape == (4, 4) and padded["sft_mask"][3].sum() == 0
    assert sft_aux.scales(0.0, 10.0, 1.0) == (0.0, 1.0)          # RL off: the SFT token mean alone
    assert sft_aux.scales(30.0, 10.0, 0.5) == (40 / 30, 0.5 * 40 / 10)
    c.rl.sft_aux.loss_tokens = "label"
    with pytest.raises(ValueError, match="rl.sft_aux.loss_tokens='label'"):
        sft_aux.check_config(c.rl)


def test_rl_run_with_the_sft_stream_logs_and_resumes(tmp_path):
    from shared.rewards import RewardManager
    from shared.rl.learner import RLLearner

    config = tiny_config()
    config.train.steps = 2
    config.train.log_every = 1
    config.train.checkpoint_every = 2
    config.train.progress = False
    config.train.async_checkpoint = False
    config.optim.schedule = "constant"
    config.optim.warmup_steps = 1
    config.rl.sft_aux.batch_size = 3                    # padded to the batch shards inside
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    train = load_task(config.rl.task, "train", 64, 0)
    learner = RLLearner(config, str(tmp_path), tokenizer, train, {}, RewardManager([("task/arithmetic", 1.0)]))
    learner.fit()
    learner.close()
    rows = [json.loads(line) for line in open(os.path.join(tmp_path, "metrics.jsonl"))]
    nll = [r["train/sft_nll"] for r in rows if "train/sft_nll" in r]
    assert len(nll) == 2 and all(0.5 < v < 10 for v in nll), nll      # ~ln(384) = 5.95 at init
    again = RLLearner(config, str(tmp_path), tokenizer, train, {}, RewardManager([("task/arithmetic", 1.0)]))
    assert again.sft_stream.get_state() == {"epoch": 0, "index": 2 * 3}
    again.close()
