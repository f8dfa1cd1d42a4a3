"""shared/train/optim.py: schedules against hand-computed values, optimizers against numpy references."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from shared.config.base import base_config
from shared.registry import OPTIMIZERS, SCHEDULES, UnknownNameError
from shared.train import optim


def optim_cfg(**overrides):
    cfg = base_config().optim
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


# ------------------------------------------------------------------------------------------ schedules

SCHEDULE_CFG = dict(lr=1.0, warmup_steps=10, decay_steps=0, min_lr_ratio=0.1, wsd_decay_fraction=0.2)
TOTAL = 110  # decay horizon = 110; 100 steps after warmup


@pytest.mark.parametrize("name", ["constant", "cosine", "linear", "wsd"])
def test_every_schedule_warms_up_linearly_from_zero(name):
    schedule = SCHEDULES.get(name)(optim_cfg(**SCHEDULE_CFG), TOTAL)
    assert optim.lr_at(schedule, 0) == 0.0
    assert optim.lr_at(schedule, 5) == pytest.approx(0.5)
    assert optim.lr_at(schedule, 10) == pytest.approx(1.0)


@pytest.mark.parametrize("name, step, expected", [
    ("constant", 60, 1.0), ("constant", 10_000, 1.0),
    # cosine: 0.1 + 0.9 * 0.5 * (1 + cos(pi * (step - 10) / 100))
    ("cosine", 35, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4))), ("cosine", 60, 0.55), ("cosine", 110, 0.1),
    ("cosine", 500, 0.1),
    # linear: 1 - 0.9 * (step - 10) / 100
    ("linear", 35, 0.775), ("linear", 60, 0.55), ("linear", 110, 0.1), ("linear", 500, 0.1),
    # wsd: decay over the last round(0.2 * 110) = 22 steps, i.e. from step 88 to 110
    ("wsd", 50, 1.0), ("wsd", 88, 1.0), ("wsd", 99, 0.55), ("wsd", 110, 0.1), ("wsd", 500, 0.1),
])
def test_schedule_values(name, step, expected):
    schedule = SCHEDULES.get(name)(optim_cfg(**SCHEDULE_CFG), TOTAL)
    assert optim.lr_at(schedule, step) == pytest.approx(expected, rel=1e-6)
    assert float(jax.jit(schedule)(jnp.int32(step))) == pytest.approx(expected, rel=1e-6)  # traceable


def test_wsd_decay_length_is_rounded_not_truncated():
    # 0.29 * 100 == 28.999999999999996 in floating point: the decay must still span 29 steps (71 -> 100)
    schedule = optim.wsd_schedule(optim_cfg(**{**SCHEDULE_CFG, "wsd_decay_fraction": 0.29}), 100)
    assert optim.lr_at(schedule, 71) == pytest.approx(1.0)
    assert optim.lr_at(schedule, 72) == pytest.approx(1.0 - 0.9 / 29, rel=1e-6)
    assert optim.lr_at(schedule, 100) == pytest.approx(0.1)


def test_explicit_decay_steps_overrides_total_steps():
    schedule = optim.cosine_schedule(optim_cfg(**{**SCHEDULE_CFG, "decay_steps": 60}), 1000)
    assert optim.lr_at(schedule, 35) == pytest.approx(0.55)  # middle of [10, 60]
    assert optim.lr_at(schedule, 60) == pytest.approx(0.1)
    assert optim.lr_at(schedule, 900) == pytest.approx(0.1)


def test_schedule_rejects_warmup_past_horizon_and_bad_wsd_fraction():
    with pytest.raises(ValueError, match="optim.warmup_steps"):
        optim.cosine_schedule(optim_cfg(**{**SCHEDULE_CFG, "warmup_steps": 200}), TOTAL)
    with pytest.raises(ValueError, match="optim.wsd_decay_fraction"):
        optim.wsd_schedule(optim_cfg(**{**SCHEDULE_CFG, "wsd_decay_fraction": 0.95}), TOTAL)


# ------------------------------------------------------------------------------------------ trees

def tiny_params():
    rng = np.random.default_rng(0)
    return {
        "embed": {"embedding": rng.normal(size=(5, 3)).astype(np.float32)},
        "layer": {"kernel": rng.normal(size=(3, 4)).astype(np.float32),
                  "bias": rng.normal(size=(4,)).astype(np.float32)},
        "norm": {"scale": rng.normal(size=(4,)).astype(np.float32)},
    }


def tiny_grads(seed):
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(lambda x: rng.normal(size=x.shape).astype(np.float32), tiny_params())


DECAYED_MATRICES = {"embed/embedding": False, "layer/kernel": True, "layer/bias": False, "norm/scale": False}


def flat(tree):
    return {optim.path_to_str(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def run_steps(tx, params, grads_list):
    params = jax.tree_util.tree_map(jnp.asarray, params)
    state = tx.init(params)
    for grads in grads_list:
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return flat(params)


def numpy_adamw(params, grads_list, lr, b1, b2, eps, wd, decayed):
    out = {}
    for name, p in flat(params).items():
        p, m, v = p.astype(np.float64), 0.0, 0.0
        for t, grads in enumerate(grads_list, start=1):
            g = flat(grads)[name].astype(np.float64)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            step = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
            p = p - lr * (step + (wd * p if decayed[name] else 0.0))
        out[name] = p
    return out


# ------------------------------------------------------------------------------------------ optimizers

def constant_cfg(**overrides):
    base = dict(schedule="constant", warmup_steps=0, lr=0.1, grad_clip=0.0, weight_decay=0.1, b1=0.9, b2=0.95)
    return optim_cfg(**{**base, **overrides})


def test_adamw_matches_numpy_with_decay_on_matrices_only():
    cfg = constant_cfg(name="adamw", weight_decay_mask="matrices")
    tx, _ = optim.make_optimizer(cfg, 10, tiny_params())
    grads = [tiny_grads(1), tiny_grads(2)]
    got = run_steps(tx, tiny_params(), grads)
    want = numpy_adamw(tiny_params(), grads, 0.1, 0.9, 0.95, 1e-8, 0.1, DECAYED_MATRICES)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # the decayed leaf really differs from an undecayed run (the mask matters)
    undecayed = numpy_adamw(tiny_params(), grads, 0.1, 0.9, 0.95, 1e-8, 0.1, dict.fromkeys(want, False))
    assert not np.allclose(got["layer/kernel"], undecayed["layer/kernel"], rtol=1e-5)


def test_adamw_bfloat16_first_moment_matches_numpy_rounding_it_each_step():
    """optim.mu_dtype="bfloat16": the stored first moment is bfloat16 (decayed in bfloat16), each step uses the
    new moment before rounding and stores it rounded (numpy reference with ml_dtypes' bfloat16); the second moment
    stays float32."""
    import ml_dtypes
    cfg = constant_cfg(name="adamw", weight_decay_mask="none", weight_decay=0.0, mu_dtype="bfloat16")
    tx, _ = optim.make_optimizer(cfg, 10, tiny_params())
    grads = [tiny_grads(1), tiny_grads(2), tiny_grads(3)]
    params = jax.tree_util.tree_map(jnp.asarray, tiny_params())
    state = tx.init(params)
    dtypes = {leaf.dtype for leaf in jax.tree_util.tree_leaves(state) if hasattr(leaf, "dtype") and leaf.ndim}
    assert dtypes == {jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32)}
    got = run_steps(tx, tiny_params(), grads)
    for name, p in flat(tiny_params()).items():
        p, m, v = p.astype(np.float64), 0.0, 0.0
        for t, g in enumerate(grads, start=1):
            g = flat(g)[name].astype(np.float64)
            bf16 = lambda x: np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
            m_new = 0.1 * g + bf16(bf16(0.9) * m)   # optax decays the stored moment in bfloat16 (b1 too)
            v = 0.95 * v + 0.05 * g * g
            p = p - 0.1 * (m_new / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.95 ** t)) + 1e-8)
            m = bf16(m_new)
        np.testing.assert_allclose(got[name], p, rtol=1e-5, atol=1e-6, err_msg=name)
    full = run_steps(optim.make_optimizer(constant_cfg(name="adamw", weight_decay_mask="none", weight_decay=0.0),
                                          10, tiny_params())[0], tiny_params(), grads)
    assert any(not np.allclose(got[k], full[k], rtol=1e-6, atol=1e-7) for k in got)   # the rounding shows
    with pytest.raises(ValueError, match="optim.mu_dtype='float16'"):
        optim.make_optimizer(constant_cfg(name="adamw", mu_dtype="float16"), 10, tiny_params())


def test_lion_matches_numpy():
    cfg = constant_cfg(name="lion", b2=0.99, weight_decay_mask="all")
    tx, _ = optim.make_optimizer(cfg, 10, tiny_params())
    grads = [tiny_grads(1), tiny_grads(2)]
    got = run_steps(tx, tiny_params(), grads)
    for name, p in flat(tiny_params()).items():
        p, m = p.astype(np.float64), 0.0
        for g in (flat(gs)[name] for gs in grads):
            direction = np.sign(0.9 * m + 0.1 * g)
            m = 0.99 * m + 0.01 * g
            p = p - 0.1 * (direction + 0.1 * p)
        np.testing.assert_allclose(got[name], p, rtol=1e-5, atol=1e-6, err_msg=name)


def test_sgd_momentum_matches_numpy():
    cfg = constant_cfg(name="sgd", b1=0.9, weight_decay_mask="matrices")
    tx, _ = optim.make_optimizer(cfg, 10, tiny_params())
    grads = [tiny_grads(1), tiny_grads(2)]
    got = run_steps(tx, tiny_params(), grads)
    for name, p in flat(tiny_params()).items():
        p, m = p.astype(np.float64), 0.0
        for g in (flat(gs)[name] for gs in grads):
            m = g + 0.9 * m  # heavy ball, decay outside the momentum
            p = p - 0.1 * (m + (0.1 * p if DECAYED_MATRICES[name] else 0.0))
        np.testing.assert_allclose(got[name], p, rtol=1e-5, atol=1e-6, err_msg=name)


def test_grad_clipping_scales_to_the_global_norm():
    cfg = constant_cfg(name="sgd", b1=0.0, lr=1.0, weight_decay=0.0, grad_clip=1.0)
    params = tiny_params()
    tx, _ = optim.make_optimizer(cfg, 10, params)
    grads = tiny_grads(1)
    norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in flat(grads).values()))
    assert norm > 1.0
    updates, _ = tx.update(grads, tx.init(params), params)
    for name, update in flat(updates).items():
        np.testing.assert_allclose(update, -flat(grads)[name] / norm, rtol=1e-5, err_msg=name)
    clipped_norm = math.sqrt(sum(float(np.sum(u.astype(np.float64) ** 2)) for u in flat(updates).values()))
    assert clipped_norm == pytest.approx(1.0, rel=1e-5)
    # below the threshold, gradients pass unchanged
    small = jax.tree_util.tree_map(lambda g: g / (2 * norm), grads)
    updates, _ = tx.update(small, tx.init(params), params)
    for name, update in flat(updates).items():
        np.testing.assert_allclose(update, -flat(small)[name], rtol=1e-6, err_msg=name)


# ------------------------------------------------------------------------------------------ masks

def test_matrices_mask_skips_embeddings_norms_biases_and_stacked_vectors():
    stacked = {  # scanned layers: a leading [layers] axis turns norm scales and biases into 2-D arrays
        "embed": {"embedding": np.zeros((7, 4))},
        "layers": {"attn": {"q": {"kernel": np.zeros((2, 4, 8))}},
                   "attn_norm": {"scale": np.zeros((2, 4))},
                   "mlp": {"up": {"kernel": np.zeros((2, 4, 16)), "bias": np.zeros((2, 16))}}},
        "final_norm": {"scale": np.zeros((4,))},
        "lm_head": {"kernel": np.zeros((4, 7))},
        "pos_embed": np.zeros((16, 4)),
    }
    got = flat(optim.weight_decay_mask_fn("matrices")(stacked))
    assert {name for name, decay in got.items() if decay} == {"layers/attn/q/kernel", "layers/mlp/up/kernel",
                                                              "lm_head/kernel"}
    assert all(flat(optim.weight_decay_mask_fn("all")(stacked)).values())
    assert not any(flat(optim.weight_decay_mask_fn("none")(stacked)).values())
    with pytest.raises(ValueError, match="optim.weight_decay_mask"):
        optim.weight_decay_mask_fn("matrix")


class TinyModel(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Embed(5, 3, rngs=rngs)
        self.layers = nnx.List([nnx.Linear(3, 3, rngs=rngs) for _ in range(2)])
        self.norm = nnx.RMSNorm(3, rngs=rngs)


def test_nnx_state_and_pure_dict_give_same_paths_masks_and_updates():
    state = nnx.state(TinyModel(nnx.Rngs(0)), nnx.Param)
    pure = nnx.to_pure_dict(state)
    assert optim.leaf_paths(state) == optim.leaf_paths(pure) == [
        "embed/embedding", "layers/0/bias", "layers/0/kernel", "layers/1/bias", "layers/1/kernel", "norm/scale"]
    mask = flat(optim.weight_decay_mask_fn("matrices")(state))
    assert mask == {"embed/embedding": False, "layers/0/bias": False, "layers/0/kernel": True,
                    "layers/1/bias": False, "layers/1/kernel": True, "norm/scale": False}

    cfg = constant_cfg(name="adamw", param_groups={"layers/1": 0.5})
    grads_pure = jax.tree_util.tree_map(lambda x: jnp.full_like(x, 0.3), pure)
    grads_state = jax.tree_util.tree_map(lambda x: jnp.full_like(x, 0.3), state)
    tx_pure, _ = optim.make_optimizer(cfg, 10, pure)
    tx_state, _ = optim.make_optimizer(cfg, 10, state)
    updates_pure, _ = tx_pure.update(grads_pure, tx_pure.init(pure), pure)
    updates_state, _ = tx_state.update(grads_state, tx_state.init(state), state)
    for name, update in flat(updates_pure).items():
        np.testing.assert_array_equal(flat(updates_state)[name], update, err_msg=name)


# ------------------------------------------------------------------------------------------ param groups

def test_param_group_multiplier_halves_the_final_adam_update():
    params, grads = tiny_params(), tiny_grads(1)
    plain, _ = optim.make_optimizer(constant_cfg(name="adamw"), 10, params)
    grouped, _ = optim.make_optimizer(constant_cfg(name="adamw", param_groups={"^layer/": 0.5}), 10, params)
    plain_updates, _ = plain.update(grads, plain.init(params), params)
    grouped_updates, _ = grouped.update(grads, grouped.init(params), params)
    plain_updates, grouped_updates = flat(plain_updates), flat(grouped_updates)
    for name in plain_updates:
        factor = 0.5 if name.startswith("layer/") else 1.0
        assert np.all(plain_updates[name] != 0)
        np.testing.assert_array_equal(grouped_updates[name], factor * plain_updates[name], err_msg=name)


def test_param_groups_from_config_dict_and_their_errors():
    params = tiny_params()
    cfg = constant_cfg(name="adamw")
    cfg.param_groups["embed"] = 0.0  # a frozen group: its update is exactly zero
    tx, _ = optim.make_optimizer(cfg, 10, params)
    updates = flat(tx.update(tiny_grads(1), tx.init(params), params)[0])
    assert np.all(updates["embed/embedding"] == 0) and np.all(updates["layer/kernel"] != 0)

    with pytest.raises(ValueError, match="matches no parameter"):
        optim.make_optimizer(constant_cfg(param_groups={"attn": 0.5}), 10, params)
    with pytest.raises(ValueError, match="several regexes"):
        optim.make_optimizer(constant_cfg(param_groups={"layer": 0.5, "kernel": 2.0}), 10, params)
    with pytest.raises(ValueError, match="not a valid regex"):
        optim.make_optimizer(constant_cfg(param_groups={"layer(": 0.5}), 10, params)
    with pytest.raises(ValueError, match="lr multiplier"):
        optim.make_optimizer(constant_cfg(param_groups={"layer": -1.0}), 10, params)


def test_make_optimizer_returns_its_schedule_and_works_under_jit():
    params = tiny_params()
    tx, schedule = optim.make_optimizer(optim_cfg(**SCHEDULE_CFG), TOTAL, params)
    assert optim.lr_at(schedule, 60) == pytest.approx(0.55)  # base config schedule is cosine

    @jax.jit
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    params = jax.tree_util.tree_map(jnp.asarray, params)
    state = tx.init(params)
    for seed in range(3):
        params, state = step(params, state, tiny_grads(seed))
    assert all(np.all(np.isfinite(leaf)) for leaf in flat(params).values())


def test_unknown_names_raise_the_registry_error_listing_names():
    with pytest.raises(UnknownNameError, match="adamw, lion, sgd") as error:
        optim.make_optimizer(optim_cfg(name="adam"), 10, tiny_params())
    assert "Did you mean 'adamw'" in str(error.value)
    with pytest.raises(UnknownNameError, match="constant, cosine, linear, wsd"):
        optim.make_optimizer(optim_cfg(schedule="cosin"), 10, tiny_params())
    assert set(OPTIMIZERS.names()) >= {"adamw", "lion", "sgd"}
