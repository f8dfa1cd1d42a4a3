"""projects/gap/model.py: the image splice, frozen vision, slots / feedback latent inputs, the GAP losses."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from projects.gap import layout
from projects.gap.model import (GapModel, answer_accuracy, gap_loss, gap_model_config, latent_targets,
                                pca_of_images, text_loss)
from shared.latent import latent_rollout, two_pass_forward

B, K = 4, 9
HAS = np.array([True, False, True, False])
P = layout.latent_pos(K)[0]   # 38: the first slot; tokens[:, P - 1] is <latent>


def tiny(**overrides):
    # a larger init std than the spec's 0.02 so that every input visibly shapes the logits
    return gap_model_config("tiny", model=dict(init_std=0.2), vision=dict(init_std=0.2), **overrides)


def make_batch(seed=0, has=HAS):
    r = np.random.RandomState(seed)
    tokens = r.randint(layout.ID["0"], layout.ID["9"] + 1, (B, layout.SEQ_LEN)).astype(np.int32)
    tokens[:, 0], tokens[:, 1] = layout.BOS, layout.ID["<img>"]
    tokens[:, list(layout.IMAGE_POS)] = layout.IMGSLOT
    tokens[:, 11] = layout.ID["</img>"]
    latent_mask = np.zeros((B, layout.SEQ_LEN), bool)
    for i in np.flatnonzero(has):
        tokens[i, layout.LATENT_OPEN] = layout.ID["<latent>"]
        tokens[i, list(layout.latent_pos(K))] = layout.LATSLOT
        tokens[i, P + K] = layout.ID["</latent>"]
        latent_mask[i, list(layout.latent_pos(K))] = True
    targets = np.concatenate([tokens[:, 1:], np.full((B, 1), layout.PAD, np.int32)], axis=1)
    loss_mask = np.zeros((B, layout.SEQ_LEN), np.float32)
    loss_mask[:, layout.PROMPT_LEN - 1:-1] = 1.0
    loss_mask[:, :-1][latent_mask[:, 1:]] = 0.0           # targets that are latent slots
    return {"tokens": tokens, "targets": targets, "loss_mask": loss_mask,
            "image": r.rand(B, 84, 84, 1).astype(np.float32), "aux_image": r.rand(B, 84, 84, 1).astype(np.float32),
            "has_latent": np.asarray(has), "answer_pos": np.tile(np.array([[60, 61]], np.int32), (B, 1))}


@functools.lru_cache(maxsize=None)
def _fwd(mode, k=K, grad=True):
    return nnx.jit(lambda m, b: m.forward(b, mode=mode, k=k, grad=grad))


@functools.lru_cache(maxsize=None)
def _loss(mode, latent_loss="mse"):
    return nnx.jit(lambda m, b, lam: gap_loss(m, b, mode=mode, lam=lam, latent_loss=latent_loss))


def loss_of(model, batch, mode="feedback", lam=1.0, latent_loss="mse"):
    return _loss(mode, latent_loss)(model, batch, jnp.float32(lam))


def fwd(model, batch, mode, **kw):
    return _fwd(mode, **kw)(model, batch)


def logits(model, batch, mode):
    return np.asarray(fwd(model, batch, mode)[0]["logits"])


@pytest.fixture(scope="module")
def model():
    return GapModel(tiny(latent_head="linear"), rngs=nnx.Rngs(params=0))


def test_config_shapes_and_spec_sizes(model):
    cfg = gap_model_config()
    assert not cfg.model.tie_embeddings and cfg.model.d_model == 256 and cfg.model.n_layers == 8
    assert cfg.vision.patch == 28 and cfg.vision.d_model == 192
    full = nnx.eval_shape(lambda: GapModel(cfg, rngs=nnx.Rngs(params=0)))
    count = lambda mod: sum(x.size for x in jax.tree.leaves(nnx.state(mod, nnx.Param)))  # noqa: E731
    assert abs(count(full.decoder) / 6.5e6 - 1) < 0.05 and abs(count(full.encoder) / 1.9e6 - 1) < 0.05
    with pytest.raises(KeyError):
        gap_model_config("tiny", lamda=1)
    batch = make_batch()
    assert model.embed_images(batch["image"]).shape == (B, layout.N_IMAGE, 32)
    assert "lm" in model.decoder.heads and model.decoder.heads["lm"].tied is False
    for mode in ("none", "slots", "feedback"):
        out, zs = fwd(model, batch, mode)
        assert out["logits"].shape == (B, layout.SEQ_LEN, layout.VOCAB_SIZE)
        assert out["prefinal"].shape == (B, layout.SEQ_LEN, 32)
        assert (zs is None) == (mode == "none") and (zs is None or zs.shape == (B, K, 32))


def test_image_slots_read_e_vis(model):
    a = make_batch(0)
    b = dict(a, image=make_batch(1)["image"])
    diff = np.abs(logits(model, a, "none") - logits(model, b, "none")).max(axis=(0, 2))
    assert np.all(diff[:2] == 0) and np.all(diff[2:] > 1e-5), diff
    # the token ids at the image slots are not read
    c = dict(a, tokens=a["tokens"].copy())
    c["tokens"][:, list(layout.IMAGE_POS)] = layout.ID["7"]
    np.testing.assert_array_equal(logits(model, a, "none"), logits(model, c, "none"))


def _grad_norms(m, batch):
    grads = nnx.jit(nnx.grad(lambda m: gap_loss(m, batch, mode="slots", lam=1.0)[0]))(m)
    norm = lambda t: float(optax.global_norm(t))  # noqa: E731
    return norm(grads["encoder"]), norm(grads["projector"]), norm(grads["decoder"]), norm(grads["slots"])


def test_frozen_vision_gets_zero_grads_the_decoder_does_not():
    batch = make_batch()
    frozen = GapModel(tiny(frozen_vision=True), rngs=nnx.Rngs(params=0))
    enc, proj, dec, slots = _grad_norms(frozen, batch)
    assert enc == 0 and proj == 0 and dec > 0 and slots > 0
    trainable = GapModel(tiny(), rngs=nnx.Rngs(params=0))
    enc, proj, dec, _ = _grad_norms(trainable, batch)
    assert enc > 0 and proj > 0 and dec > 0


def test_slots_mode_writes_the_constants_for_latent_rows_only():
    m = GapModel(tiny(), rngs=nnx.Rngs(params=0))
    batch = make_batch()
    a = logits(m, batch, "slots")
    _, zs = fwd(m, batch, "slots")
    np.testing.assert_array_equal(np.asarray(zs[0]), np.asarray(m.slots[...]))
    m.slots[...] = m.slots[...] + 0.5
    b = logits(m, batch, "slots")
    diff = np.abs(a - b).max(axis=2)   # [B,T]
    assert np.all(diff[~HAS] == 0)
    assert np.all(diff[HAS][:, :P] == 0) and np.all(diff[HAS][:, P:] > 1e-5)
    # rows without has_latent read their tokens: slots mode = no-latent mode there
    np.testing.assert_array_equal(b[~HAS], logits(m, batch, "none")[~HAS])


def test_feedback_zs_equal_the_rollout_and_pass2_equals_two_pass(model):
    batch = make_batch()
    out, zs = fwd(model, batch, "feedback")

    @nnx.jit
    def reference(model, batch, zs):
        e_vis = model.embed_images(batch["image"])
        tokens = jnp.asarray(batch["tokens"])
        embeds = jnp.zeros((B, layout.SEQ_LEN, 32)).at[:, list(layout.IMAGE_POS)].set(e_vis)
        mask = jnp.zeros((B, layout.SEQ_LEN), bool).at[:, list(layout.IMAGE_POS)].set(True)
        ref = latent_rollout(model.decoder, model.head, tokens[:, :P], K, embeds=embeds[:, :P],
                             embed_mask=mask[:, :P])["zs"]
        # z_1 by hand: the head on the prompt's last position of a plain (no-cache) forward
        prompt = model.decoder(tokens[:, :P], embeds=embeds[:, :P], embed_mask=mask[:, :P], hidden="prefinal")
        z1 = model.head(prompt["prefinal"][:, -1], prompt["hidden"][:, -1])
        # pass 2 = two_pass_forward with the given zs
        two, _ = two_pass_forward(model.decoder, model.head, tokens, layout.latent_pos(K), zs=zs, embeds=embeds,
                                  embed_mask=mask)
        return ref, z1, two

    ref, z1, two = reference(model, batch, zs)
    np.testing.assert_allclose(np.asarray(zs), np.asarray(ref), atol=1e-5)
    np.testing.assert_allclose(np.asarray(zs[:, 0]), np.asarray(z1), atol=1e-5)
    assert float(jnp.abs(zs[:, 1] - zs[:, 0]).max()) > 1e-5     # the recurrence moves
    # latent rows: pass 2 = two_pass_forward with these zs; other rows: the no-latent forward
    got = np.asarray(out["logits"])
    np.testing.assert_allclose(got[HAS], np.asarray(two["logits"])[HAS], atol=1e-4)
    np.testing.assert_allclose(got[~HAS], logits(model, batch, "none")[~HAS], atol=1e-5)


def test_gap_loss_lam0_is_text_loss_and_latent_loss_masks_rows(model):
    batch = make_batch()
    loss, met = loss_of(model, batch, lam=0.0)
    ref = text_loss(fwd(model, batch, "feedback")[0], batch)
    np.testing.assert_allclose(float(loss), float(ref), rtol=1e-5)
    assert float(met["latent_loss"]) > 0 and np.isfinite(float(met["z_norm_median"]))
    assert float(met["evis_norm_median"]) > 0
    loss1, met1 = loss_of(model, batch, lam=2.0)
    np.testing.assert_allclose(float(loss1), float(met1["text_loss"] + 2 * met1["latent_loss"]), rtol=1e-5)
    # aux images of rows without has_latent do not count
    other = dict(batch, aux_image=batch["aux_image"].copy())
    other["aux_image"][~HAS] = 0.0
    _, met2 = loss_of(model, other)
    _, met3 = loss_of(model, batch)
    np.testing.assert_allclose(float(met2["latent_loss"]), float(met3["latent_loss"]), rtol=1e-6)
    assert latent_targets(model, batch).shape == (B, K, 32)
    _, met4 = loss_of(model, batch, mode="none")
    assert float(met4["latent_loss"]) == 0 and np.isnan(float(met4["z_norm_median"]))


def test_answer_accuracy_exact_match_per_row(model):
    batch = make_batch()
    onehot = jax.nn.one_hot(batch["targets"], layout.VOCAB_SIZE) * 10.0
    acc, rows = answer_accuracy(model, batch, out={"logits": onehot})
    assert float(acc) == 1.0 and rows.all()
    wrong = np.asarray(onehot).copy()
    wrong[1, 61] = np.roll(wrong[1, 61], 1)                     # row 1's second answer target (position 61)
    acc, rows = answer_accuracy(model, batch, out={"logits": jnp.asarray(wrong)})
    assert float(acc) == 0.75 and list(np.asarray(rows)) == [True, False, True, True]
    acc, _ = answer_accuracy(model, batch, out=fwd(model, batch, "feedback")[0])
    assert 0.0 <= float(acc) <= 1.0


def test_answer_accuracy_reads_gridops_rows():
    """gridops.encode's answer_pos and answer_accuracy agree: logits that put the targets first score 1, and one
    wrong answer target (a two-digit rowsum's units digit) fails its row only."""
    from projects.gap import gridops

    examples = gridops.make_examples(gridops.synthetic_pools(0, n_per_digit=5), "test", 4, seed=3,
                                     kinds=("rowsum",))
    for variant in ("direct", "latent_parser"):
        batch = gridops.make_batch(examples, variant)
        onehot = np.array(jax.nn.one_hot(batch["targets"], layout.VOCAB_SIZE))
        acc, _ = answer_accuracy(None, batch, out={"logits": jnp.asarray(onehot)})
        assert float(acc) == 1.0
        units = batch["answer_pos"][2, 1]
        onehot[2, units] = np.roll(onehot[2, units], 1)
        acc, rows = answer_accuracy(None, batch, out={"logits": jnp.asarray(onehot)})
        assert list(np.asarray(rows)) == [True, True, False, True]


def test_adamw_lowers_gap_loss_feedback_pca():
    cfg = tiny(frozen_vision=True)
    m = GapModel(cfg, rngs=nnx.Rngs(params=0))
    images = np.random.RandomState(5).rand(16, 84, 84, 1).astype(np.float32)
    fit = pca_of_images(m, images, explained=0.95)
    assert 1 <= fit.k <= 32
    m.set_head("pca", fit=fit)
    batch = make_batch()
    opt = nnx.Optimizer(m, optax.adamw(3e-3, weight_decay=0.0), wrt=nnx.Param)

    @nnx.jit
    def step(m, opt, batch):
        (loss, met), grads = nnx.value_and_grad(
            lambda m: gap_loss(m, batch, mode="feedback", lam=1.0, latent_loss="mse"), has_aux=True)(m)
        opt.update(m, grads)
        return loss, met

    losses, lat = [], []
    for _ in range(8):
        loss, met = step(m, opt, batch)
        losses.append(float(loss))
        lat.append(float(met["latent_loss"]))
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses
    assert lat[-1] < lat[0], lat
