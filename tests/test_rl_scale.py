"""The RL learner at scale: micro-batched log-prob passes and updates equal whole-batch ones, the sampler's
split calls equal one call, the 8-device step equals one device, rollout meshes, memory budgets."""
import jax
import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.rewards import RewardManager
from shared.rl import budget
from shared.rl.learner import RLLearner
from shared.data.examples import load_task


def scale_config(preset="cpu_1", micro_batch_tokens=0, dtype="float32", **rl):
    c = base_config()
    c.task = "rl"
    c.model.update(vocab_size=384, d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, head_dim=16, d_ff=64,
                   dtype=dtype, remat="full", head_chunk_tokens=16, head_chunk_vocab=100)
    c.mesh.preset = preset
    c.rl.task = "rl/arithmetic"
    c.rl.prompts_per_step = 4
    c.rl.group_size = 4
    c.rl.max_new_tokens = 8
    c.rl.rewards = [("task/arithmetic", 1.0)]
    c.rl.kl_coef = 0.05
    c.rl.micro_batch_tokens = micro_batch_tokens
    c.rl.update(rl)
    c.train.steps = 2
    c.train.progress = False
    c.train.async_checkpoint = False
    c.optim.name = "sgd"            # new params = old - lr * grad: the grads show in the params
    c.optim.lr = 0.5
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 1
    c.optim.weight_decay = 0.0
    c.optim.grad_clip = 0.0
    return c


def make_learner(config, workdir):
    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    train = load_task(config.rl.task, "train", 64, 0)
    return RLLearner(config, str(workdir), tokenizer, train, {}, RewardManager(list(config.rl.rewards)))


@pytest.fixture(scope="module")
def rollout_batch(tmp_path_factory):
    """One scored rollout with varied rewards (so advantages are not all 0), from a 1-device learner."""
    learner = make_learner(scale_config(), tmp_path_factory.mktemp("source"))
    scored, _ = learner.collect(jax.random.key(0))
    scored.rewards = np.linspace(0.0, 1.0, len(scored.rewards)).astype(np.float32)
    yield scored
    learner.close()


def host_params(learner):
    return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(learner.trainer.params))]


def test_micro_batched_update_equals_the_whole_batch_step(tmp_path, rollout_batch):
    whole = make_learner(scale_config(micro_batch_tokens=10_000), tmp_path / "whole")
    # 21 tokens per row (prompt bucket 32 + 8 new -> 40): 40 tokens per micro-batch = 1 row per micro-batch
    micro = make_learner(scale_config(micro_batch_tokens=40, mini_batches=2), tmp_path / "micro")
    whole_micro_rows = whole._micro_rows(16, 40, whole.micro_batch_tokens)
    assert whole_micro_rows == (16, 1)
    assert micro._micro_rows(8, 40, micro.micro_batch_tokens) == (1, 8)
    # the whole-batch learner takes the same two mini-batches in one optimizer step each
    whole.rl.mini_batches = 2
    batch, _ = whole.build_batch(rollout_batch)
    micro_batch, _ = micro.build_batch(rollout_batch)
    for name in ("old_logp", "ref_logp", "advantages"):
        np.testing.assert_allclose(micro_batch[name], batch[name], rtol=1e-5, atol=1e-6, err_msg=name)
    got = micro.update(micro_batch, jax.random.key(1))
    want = whole.update(batch, jax.random.key(1))
    for key in ("loss", "pg_loss", "kl_loss", "grad_norm", "entropy"):
        assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), key
    for a, b in zip(host_params(micro), host_params(whole)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert any(not np.allclose(a, b) for a, b in zip(host_params(micro), [np.asarray(x) for x in jax.tree.leaves(
        jax.device_get(micro.ref_params))]))  # the step moved the params
    micro.close()
    whole.close()


def test_uneven_micro_batches_are_padded_with_rows_that_weigh_nothing(tmp_path, rollout_batch):
    whole = make_learner(scale_config(micro_batch_tokens=10_000), tmp_path / "whole")
    uneven = make_learner(scale_config(micro_batch_tokens=3 * 40), tmp_path / "uneven")
    assert uneven._micro_rows(16, 40, uneven.micro_batch_tokens) == (3, 6)   # 16 rows + 2 padding rows
    batch, _ = whole.build_batch(rollout_batch)
    got, want = uneven.update(batch, jax.random.key(2)), whole.update(batch, jax.random.key(2))
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-5, abs=1e-6)
    assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-5)
    for a, b in zip(host_params(uneven), host_params(whole)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    uneven.close()
    whole.close()


def test_eight_device_rl_step_equals_one_device(tmp_path, rollout_batch):
    one = make_learner(scale_config(micro_batch_tokens=10_000), tmp_path / "one")
    eight = make_learner(scale_config(preset="cpu_8", micro_batch_tokens=40), tmp_path / "eight")
    assert eight.mesh.size == 8 and eight.batch_multiple == 4
    assert eight._micro_rows(16, 40, eight.micro_batch_tokens) == (4, 4)
    for a, b in zip(host_params(eight), host_params(one)):  # born sharded from the same seed
        np.testing.assert_array_equal(a, b)
    batch, _ = one.build_batch(rollout_batch)
    eight_batch, _ = eight.build_batch(rollout_batch)
    np.testing.assert_allclose(eight_batch["ref_logp"], batch["ref_logp"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(eight.logprob_pass(eight.trainer.params, batch)[0],
                               one.logprob_pass(one.trainer.params, batch)[0], rtol=1e-5, atol=1e-5)
    got, want = eight.update(batch, jax.random.key(3)), one.update(batch, jax.random.key(3))
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-4, abs=1e-6)
    assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-4)
    for a, b in zip(host_params(eight), host_params(one)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    eight.close()
    one.close()


def test_sampler_split_into_calls_equals_one_call(tmp_path):
    learner = make_learner(scale_config(), tmp_path)
    prompts = learner.encode_prompts(learner.prompts.examples[:5])
    sampling = learner.sampling_params()       # temperature 1: each row's own random stream
    params = learner.rollout_params()
    one = learner.sampler.generate(params, prompts, sampling, jax.random.key(4))
    split = learner.sampler.generate(params, prompts, sampling, jax.random.key(4), max_rows=8)  # 2 prompts a call
    assert learner.sampler.trace_counts["decode"] == 2   # one compile for the whole batch, one for the calls
    for field in ("tokens", "logprobs", "lengths", "finished", "prompt_index", "prompt_tokens"):
        np.testing.assert_allclose(getattr(split, field), getattr(one, field), rtol=1e-5, atol=1e-6, err_msg=field)
    assert split.texts == one.texts
    learner.close()


@pytest.mark.parametrize("rollout_mesh", ["data", "tensor"])
def test_rollout_on_a_resharded_copy_equals_the_training_mesh(tmp_path, rollout_mesh):
    base = make_learner(scale_config(preset="cpu_8"), tmp_path / "base")
    other = make_learner(scale_config(preset="cpu_8", rollout_mesh=rollout_mesh), tmp_path / rollout_mesh)
    assert other.rollout_mesh.shape[rollout_mesh] == 8
    params = other.rollout_params()
    leaf = jax.tree.leaves(params)[0]
    assert leaf.sharding.mesh.shape[rollout_mesh] == 8
    prompts = base.encode_prompts(base.prompts.examples[:4])
    greedy = base.sampling_params(greedy=True, n=2)
    a = base.sampler.generate(base.rollout_params(), prompts, greedy, jax.random.key(0))
    b = other.sampler.generate(params, prompts, greedy, jax.random.key(0))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_allclose(a.logprobs, b.logprobs, rtol=1e-4, atol=1e-5)
    base.close()
    other.close()


def test_reference_policy_is_held_in_the_compute_dtype(tmp_path):
    learner = make_learner(scale_config(dtype="bfloat16"), tmp_path)
    dtypes = {x.ndim >= 2: x.dtype for x in jax.tree.leaves(learner.ref_params)}
    assert dtypes[True] == np.dtype("bfloat16") and dtypes[False] == np.dtype("float32")
    learner.close()
    no_kl = make_learner(scale_config(kl_coef=0.0), tmp_path / "no_kl")
    assert no_kl.ref_params is None   # no loss reads it: not built
    no_kl.close()


def test_budgets():
    config = scale_config()
    assert budget.rows_per_micro_batch(1000, 300, 4) == 12
    assert budget.rows_per_micro_batch(10, 300, 4) == 4   # at least one row per device
    config.rl.micro_batch_tokens = 777
    assert budget.micro_batch_tokens(config, 10**9) == 777
    config.rl.micro_batch_tokens = 0
    assert budget.micro_batch_tokens(config, 10**9) == budget.CPU_MICRO_BATCH_TOKENS  # CPU: no memory stats
    config.rl.rollout_max_rows = 12
    assert budget.rollout_max_rows(config, 100, 4) == 12
    # a bigger model or no remat needs more bytes per token; a longer cache more bytes per row
    m = config.model
    full = budget.train_bytes_per_token(m)
    m.remat = "none"
    assert budget.train_bytes_per_token(m) > full
    assert budget.decode_bytes_per_row(m, 200) > budget.decode_bytes_per_row(m, 100)


def test_memory_knobs_are_validated():
    from shared.config.validate import ConfigError, validate

    for key, value, message in (("rl.micro_batch_tokens", -1, "must be >= 0"),
                                ("model.head_chunk_tokens", -5, "must be >= 0"),
                                ("rl.rollout_mesh", "pipeline", "expected 'auto'")):
        config = scale_config()
        group, name = key.split(".")
        config[group][name] = value
        with pytest.raises(ConfigError, match=message):
            validate(config, 1)


def test_on_policy_step_without_a_behaviour_pass_equals_the_step_with_one(tmp_path, rollout_batch):
    skip = make_learner(scale_config(), tmp_path / "skip")
    keep = make_learner(scale_config(behaviour_pass="always"), tmp_path / "keep")
    assert not skip.needs_behaviour_pass() and keep.needs_behaviour_pass()
    skip_batch, _ = skip.build_batch(rollout_batch)
    keep_batch, _ = keep.build_batch(rollout_batch)
    assert "old_logp" not in skip_batch and "old_logp" in keep_batch
    got, want = skip.update(skip_batch, jax.random.key(5)), keep.update(keep_batch, jax.random.key(5))
    assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-5)
    for a, b in zip(host_params(skip), host_params(keep)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    skip.close()
    keep.close()


def test_first_optimizer_step_rows_skip_the_behaviour_pass_and_change_no_gradient(tmp_path, rollout_batch):
    """rl.mini_batches=2: the rows of the first optimizer step take their behaviour log-probs from that step's own
    forward (the policy has not moved: ratio 1), the others from the pass; the two optimizer steps' losses and
    gradients (SGD: the params after them) equal those with the pass over every row."""
    import jax.numpy as jnp

    learner = make_learner(scale_config(mini_batches=2), tmp_path / "two")
    assert learner.needs_behaviour_pass()
    start = jax.tree.map(jnp.copy, learner.trainer.state)
    key = jax.random.key(5)
    partial, _ = learner.build_batch(rollout_batch, update_key=key)
    first = np.split(learner.update_order(key, 0, 16), 2)[0]
    assert sorted(np.flatnonzero(partial["on_policy"])) == sorted(first)
    got = learner.update(partial, key)
    got_params = host_params(learner)
    learner.trainer.state = start
    full, _ = learner.build_batch(rollout_batch)            # no update key: the pass over every row
    assert "on_policy" not in full
    rest = np.setdiff1d(np.arange(16), first)
    np.testing.assert_allclose(partial["old_logp"][rest], full["old_logp"][rest], rtol=1e-6, atol=1e-6)
    want = learner.update(full, key)
    for name in ("loss", "pg_loss", "kl_loss", "grad_norm"):
        assert got[name] == pytest.approx(want[name], rel=1e-5, abs=1e-6), name
    for a, b in zip(got_params, host_params(learner)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    learner.close()
