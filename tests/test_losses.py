"""shared/train/losses.py: cross entropy, z-loss, SFT masking and metrics against numpy references."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared.config.base import base_config
from shared.registry import LOSSES
from shared.train import losses

B, T, V = 2, 6, 11


def config_with(z_loss=0.0):
    config = base_config()
    config.train.z_loss = z_loss
    return config


def random_batch(seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    logits = (scale * rng.normal(size=(B, T, V))).astype(np.float32)
    targets = rng.integers(0, V, size=(B, T)).astype(np.int32)
    loss_mask = (rng.random((B, T)) > 0.3).astype(np.float32)
    loss_mask[0, 0] = 1.0
    return logits, {"targets": targets, "loss_mask": loss_mask}


def numpy_reference(logits, targets, weights, z_loss):
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(-1)) + logits.max(-1)
    log_probs = logits - log_z[..., None]
    nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    total = weights.sum()
    xent = (nll * weights).sum() / total
    z_term = z_loss * (log_z ** 2 * weights).sum() / total
    accuracy = ((logits.argmax(-1) == targets) * weights).sum() / total
    return {"loss": xent + z_term, "xent": xent, "z_loss": z_term, "accuracy": accuracy,
            "tokens": float((weights > 0).sum()), "weight": total, "loss_sum": (xent + z_term) * total}


@pytest.mark.parametrize("z_loss", [0.0, 1e-2])
def test_lm_xent_matches_numpy_log_softmax(z_loss):
    logits, batch = random_batch()
    loss, metrics = losses.lm_xent(jnp.asarray(logits), batch, config_with(z_loss))
    want = numpy_reference(logits, batch["targets"], batch["loss_mask"], z_loss)
    assert float(loss) == pytest.approx(want["loss"], rel=1e-5)
    for key, value in want.items():
        assert float(metrics[key]) == pytest.approx(value, rel=1e-5), key
    assert (float(metrics["z_loss"]) > 0) == (z_loss > 0)


def test_lm_xent_is_stable_for_huge_bfloat16_logits():
    logits, batch = random_batch(scale=1e4)
    loss, metrics = losses.lm_xent(jnp.asarray(logits, jnp.bfloat16), batch, config_with(1e-4))
    assert loss.dtype == jnp.float32 and np.isfinite(float(loss))
    rounded = np.asarray(jnp.asarray(logits, jnp.bfloat16).astype(jnp.float32))
    want = numpy_reference(rounded, batch["targets"], batch["loss_mask"], 1e-4)
    assert float(loss) == pytest.approx(want["loss"], rel=1e-4)


def test_accuracy_counts_only_masked_in_tokens():
    logits = np.zeros((1, 4, 3), np.float32)
    for position, best in enumerate([0, 1, 2, 0]):
        logits[0, position, best] = 5.0
    batch = {"targets": np.array([[0, 1, 0, 0]], np.int32),   # right, right, wrong, right
             "loss_mask": np.array([[1, 1, 1, 0]], np.float32)}  # the last (right) token does not count
    _, metrics = losses.lm_xent(jnp.asarray(logits), batch, config_with())
    assert float(metrics["accuracy"]) == pytest.approx(2 / 3)
    assert float(metrics["tokens"]) == 3.0


def test_sft_xent_ignores_prompt_tokens():
    logits, batch = random_batch()
    prompt_mask = np.zeros((B, T), np.float32)
    prompt_mask[:, :3] = 1.0
    batch["loss_mask"][:, 3:] = 1.0
    batch = {**batch, "prompt_mask": prompt_mask}
    config = config_with(1e-3)
    loss, metrics = losses.sft_xent(jnp.asarray(logits), batch, config)

    perturbed = logits.copy()
    perturbed[:, :3] += 100.0 * np.random.default_rng(1).normal(size=(B, 3, V)).astype(np.float32)
    perturbed_loss, _ = losses.sft_xent(jnp.asarray(perturbed), batch, config)
    assert float(perturbed_loss) == float(loss)
    assert float(metrics["tokens"]) == B * (T - 3)

    want = numpy_reference(logits, batch["targets"], batch["loss_mask"] * (1 - prompt_mask), 1e-3)
    assert float(loss) == pytest.approx(want["loss"], rel=1e-5)
    # the same batch under lm_xent does count the prompt, so it differs
    assert float(losses.lm_xent(jnp.asarray(perturbed), batch, config)[0]) != pytest.approx(float(loss))

    grads = jax.grad(lambda x: losses.sft_xent(x, batch, config)[0])(jnp.asarray(logits))
    assert np.all(np.asarray(grads)[:, :3] == 0) and np.any(np.asarray(grads)[:, 3:] != 0)


def test_sum_form_accumulation_equals_the_full_batch_token_mean():
    logits, batch = random_batch(seed=3)
    batch["loss_mask"][0] = 0.0
    batch["loss_mask"][0, :2] = 1.0  # micro-batch 0 counts 2 tokens, micro-batch 1 more: means would be biased
    config = config_with(1e-2)
    full_loss, _ = losses.lm_xent(jnp.asarray(logits), batch, config)
    full_grad = jax.grad(lambda x: losses.lm_xent(x, batch, config)[0])(jnp.asarray(logits))

    micro = [({k: v[i:i + 1] for k, v in batch.items()}, jnp.asarray(logits[i:i + 1])) for i in range(B)]
    sums = [losses.token_sums(x, mb["targets"], mb["loss_mask"], 1e-2) for mb, x in micro]
    loss, metrics = losses.metrics_from_sums(jax.tree_util.tree_map(lambda *xs: sum(xs), *sums))
    assert float(loss) == pytest.approx(float(full_loss), rel=1e-6)
    naive = np.mean([float(losses.lm_xent(x, mb, config)[0]) for mb, x in micro])
    assert naive != pytest.approx(float(full_loss), rel=1e-3)

    # gradients: differentiate loss_sum per micro-batch, add, divide by the total weight
    total_weight = sum(float(s["weight"]) for s in sums)
    micro_grads = [jax.grad(lambda x, mb=mb: losses.lm_xent(x, mb, config)[1]["loss_sum"])(x) for mb, x in micro]
    np.testing.assert_allclose(np.concatenate(micro_grads) / total_weight, full_grad, rtol=1e-5, atol=1e-7)


def test_all_masked_batch_gives_zero_loss_and_finite_gradient():
    logits, batch = random_batch()
    batch["loss_mask"][:] = 0.0
    loss, metrics = losses.lm_xent(jnp.asarray(logits), batch, config_with(1e-2))
    assert float(loss) == 0.0 and float(metrics["tokens"]) == 0.0
    grads = jax.grad(lambda x: losses.lm_xent(x, batch, config_with(1e-2))[0])(jnp.asarray(logits))
    assert np.all(np.asarray(grads) == 0)


def test_registry_and_bad_batches():
    assert LOSSES.get("lm_xent") is losses.lm_xent and LOSSES.get("sft_xent") is losses.sft_xent
    logits, batch = random_batch()
    with pytest.raises(KeyError, match="prompt_mask"):
        losses.sft_xent(jnp.asarray(logits), batch, config_with())
    with pytest.raises(ValueError, match="does not match targets shape"):
        losses.lm_xent(jnp.asarray(logits[:, :-1]), batch, config_with())
