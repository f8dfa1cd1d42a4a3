"""rl.sft_aux (shared/rl/sft_aux.py): at lambda = 1 with the RL loss off, the update's gradient is a separate SFT
step's (sft_xent on the same demonstrations); with both on, accumulation over micro-batches gives rl_loss + lambda *
token-mean NLL exactly; the lambda schedule, the loss-token masks; the stream's batches and its position in the
loop state (the RL loop with the stream on: projects/mode_balanced/tests, the smoke run)."""

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
    """sum_mb loss_mb * weight_mb / sum_mb weight_mb (the trainer's accumulation, shared/train/step.py) with the
    scales of the whole mini-batch = rl token-mean loss + lambda * the demonstrations' token-mean NLL. Both sides are
    the same per-token log-probs with constant weights, so equal values at random params mean equal gradients (the
    gradient itself is compared in the test above)."""
    config, tokenizer, graphdef, params, demos = setup
    prompt_width, width = sft_aux.widths(tokenizer, demos, config.rl.sft_aux)
    rl_batch = rl_rows(tokenizer, load_task("rl/arithmetic", "train", 4, 2), np.random.default_rng(1), masked=False)
    rl_batch["mask"][0, 3:] = 0.0                       # uneven token counts across micro-batches
    rl_batch["advantages"] *= rl_batch["mask"]
    lam = 0.3
    demo_rows = sft_aux.encode_rows(tokenizer, demos, prompt_width, width)
    demo_rows["sft_mask"][1, 2:] = 0.0
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
        rl_loss = rl_loss_fn(config, "xla")(graphdef, p, {k: jnp.asarray(v) for k, v in rl_batch.items()}, None)[0]
        demo = {"prompt_tokens": demo_rows["sft_prompt_tokens"], "tokens": demo_rows["sft_tokens"],
                "prompt_lengths": demo_rows["sft_prompt_lengths"], "mask": demo_rows["sft_mask"]}
        logp = policy_outputs(graphdef, p, {k: jnp.asarray(v) for k, v in demo.items()}, "xla")[0]
        return rl_loss, -jnp.sum(logp) / demo_rows["sft_mask"].sum()

    rl_loss, nll = jax.jit(reference)(params)
    assert abs(float(rl_loss)) > 1e-3 and float(nll) > 1.0                 # both terms present
    np.testing.assert_allclose(float(jax.jit(accumulated)(params)), float(rl_loss + lam * nll), rtol=1e-5)


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


def test_the_stream_draws_batches_and_its_position_rides_in_the_loop_state():
    from shared.rl.learner import LoopState, PromptIterator

    config = tiny_config()
    config.rl.sft_aux.batch_size, config.rl.sft_aux.n_train = 3, 10
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    stream = sft_aux.Stream(config, tokenizer, [], PromptIterator)
    first = stream.next_rows()
    assert first["sft_tokens"].shape == (3, stream.width) and first["sft_prompt_tokens"].shape == (3, stream.prompt_width)
    assert (first["sft_tokens"] == tokenizer.eos_id).sum() == 3              # every demonstration ends with [eos]
    second = stream.next_rows()
    reward = type("R", (), {"manager": None})()
    state = LoopState(PromptIterator([{}] * 4, 2, 0), reward, stream).get_state()
    assert state["sft_aux"] == {"epoch": 0, "index": 6}
    again = sft_aux.Stream(config, tokenizer, [], PromptIterator)
    LoopState(PromptIterator([{}] * 4, 2, 0), reward, again).set_state(state)
    np.testing.assert_array_equal(again.next_rows()["sft_tokens"], stream.next_rows()["sft_tokens"])
    assert not np.array_equal(first["sft_tokens"], second["sft_tokens"])


def test_the_compile_aheads_stand_in_rows_have_the_streams_shapes_and_leave_it_in_place():
    """The RL compile-ahead lowers the update step with stand-in demonstrations: same shapes and dtypes as a real
    draw, and the stream's position unchanged (a resumed run compiles again and must draw what an uninterrupted
    run draws)."""
    from shared.rl.learner import PromptIterator

    config = tiny_config()
    config.rl.sft_aux.batch_size, config.rl.sft_aux.n_train = 4, 10
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    stream = sft_aux.Stream(config, tokenizer, [], PromptIterator)
    before = stream.get_state()
    stand_in = stream.stand_in_rows()
    assert stream.get_state() == before
    real = stream.next_rows()
    assert {k: (v.shape, v.dtype) for k, v in stand_in.items()} == {k: (v.shape, v.dtype) for k, v in real.items()}
