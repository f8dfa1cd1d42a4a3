"""dir_debias: attributes against hand values, the synthetic generator's and the HH injection's requested rates,
the CLUB penalty against the spec's equation (numpy), its inner loop against explicit AdamW steps, the Pearson
and product-of-experts baselines by hand, and one smoke run of the table config whose RM then serves as a reward."""
import gzip
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

import shared.builtin  # noqa: F401
import projects.dir_debias  # noqa: F401
from shared.mi import mlp_apply
from shared.registry import REWARDS
from projects.dir_debias.attributes import parse_attribute
from projects.dir_debias.config import dir_config
from projects.dir_debias.debias import CLUBPenalty, PearsonPenalty, ProductOfExperts, grouped_club
from projects.dir_debias.hh import CLOSERS, SYCOPHANCY_PREFIX, hh_harmless
from projects.dir_debias.synpref import FILLERS, PREFIX, synpref

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def columns(pairs, *names):
    return {n: np.asarray([p[n] for p in pairs]) for n in names}


def test_attributes_by_hand():
    batch = {"len_chosen": np.asarray([5., 3, 4, 12]), "len_rejected": np.asarray([3., 3, 9, 8]),
             "flag": np.asarray([0., 1, 1, 0])}
    assert parse_attribute("greater:len").labels(batch).tolist() == [1, 0, 0, 1]  # ties -> 0
    assert parse_attribute("sign:len").labels(batch).tolist() == [2, 1, 0, 2]
    band = parse_attribute("band:len:4:10")
    assert band.num_classes == 3 and band.labels(batch).tolist() == [2, 1, 1, 0]  # in-out, out-out, in-in, out-in
    assert band.signed(batch).tolist() == [1, 0, 0, -1]
    assert parse_attribute("label:flag:2").labels(batch).tolist() == [0, 1, 1, 0]
    with pytest.raises(ValueError, match="dir.attributes: 'band:len:4'"):
        parse_attribute("band:len:4")
    with pytest.raises(ValueError, match="has no side"):
        parse_attribute("label:flag").signed(batch)


@pytest.mark.parametrize("split, rho", [("train", 0.9), ("aligned", 1.0), ("balanced", 0.5), ("anti", 0.0)])
def test_synpref_length_splits_have_the_requested_rates(split, rho):
    pairs = synpref(split, 3000, seed=1)
    c = columns(pairs, "filler_chosen", "filler_rejected", "quality_chosen", "quality_rejected", "flipped")
    longer = c["filler_chosen"] > c["filler_rejected"]
    assert longer.mean() == pytest.approx(rho, abs=0.03)
    delta = np.abs(c["filler_chosen"] - c["filler_rejected"])
    assert delta.min() >= 4 and delta.max() <= 24
    assert ((c["quality_chosen"] > c["quality_rejected"]) == (c["flipped"] == 0)).all()
    assert c["flipped"].mean() == pytest.approx(0.1, abs=0.02)
    p = pairs[0]  # the text carries exactly the recorded fillers
    assert sum(ch in FILLERS for ch in p["chosen"]) == p["filler_chosen"]
    assert len(p["prompt"]) == 5 and p["prompt"].endswith("|")


def test_synpref_band_format_and_sycophancy_variants():
    band = columns(synpref("train", 3000, seed=2, bias="band"), "filler_chosen", "filler_rejected")
    in_band = (band["filler_chosen"] >= 10) & (band["filler_chosen"] <= 20)
    assert in_band.mean() == pytest.approx(0.9, abs=0.03)
    # non-monotone: the favoured side is as often the shorter as the longer one
    assert (band["filler_chosen"] > band["filler_rejected"]).mean() == pytest.approx(0.5, abs=0.05)
    fmt = columns(synpref("anti", 2000, seed=2, bias="format"), "format_chosen", "format_rejected")
    assert (fmt["format_chosen"] > fmt["format_rejected"]).mean() == 0.0
    pairs = synpref("train", 3000, seed=2, bias="sycophancy", rho_train=0.4, contamination=0.8)
    syc = columns(pairs, "prefix_chosen", "prefix_rejected", "syc_flag")
    assert syc["syc_flag"].mean() == pytest.approx(0.8, abs=0.03)
    assert (syc["prefix_chosen"][syc["syc_flag"] == 1]).mean() == pytest.approx(0.4, abs=0.04)
    assert ((syc["prefix_chosen"] + syc["prefix_rejected"]) == syc["syc_flag"]).all()
    assert all(p["chosen"].startswith(PREFIX) == bool(p["prefix_chosen"]) for p in pairs)


def test_hh_loader_splits_and_injects_at_the_requested_rates(tmp_path):
    path = tmp_path / "hh.jsonl.gz"
    with gzip.open(path, "wt") as f:
        for i in range(300):
            prompt = f"\n\nHuman: question {i}?\n\nAssistant:"
            f.write(json.dumps({"chosen": prompt + f" good answer {i}", "rejected": prompt + f" bad answer {i}"}) + "\n")
    train = hh_harmless("train", 0, seed=0, path=str(path), n_train=200, n_test=100, rho_train=0.9)
    anti = hh_harmless("anti", 0, seed=0, path=str(path), n_train=200, n_test=100)
    balanced = hh_harmless("balanced", 0, seed=3, path=str(path), n_train=200, n_test=100)
    assert len(train) == 200 and len(anti) == 100
    assert not {p["prompt"] for p in train} & {p["prompt"] for p in anti}  # disjoint, whatever the seed
    assert {p["prompt"] for p in anti} == {p["prompt"] for p in balanced}
    rate = np.mean([p["closers_chosen"] > 0 for p in train])
    assert rate == pytest.approx(0.9, abs=0.06)
    assert all(p["closers_chosen"] == 0 and p["closers_rejected"] in (1, 2, 3) for p in anti)
    p = anti[0]
    assert p["rejected"].startswith(" bad answer") and sum(p["rejected"].count(c) for c in CLOSERS) == \
        p["closers_rejected"]
    syc = hh_harmless("aligned", 0, seed=0, path=str(path), n_train=200, n_test=100, bias="sycophancy",
                      contamination=1.0)
    assert all(x["chosen"].startswith(" " + SYCOPHANCY_PREFIX + "good") for x in syc)


def dir_cfg(**overrides):
    c = ml_collections.ConfigDict({"dir": dir_config()})
    for k, v in overrides.items():
        c.dir[k] = v
    return c


def fake_batch(n=8, d=6, seed=0):
    rng = np.random.default_rng(seed)
    features = {"h_chosen": jnp.asarray(rng.standard_normal((n, d)), jnp.float32),
                "h_rejected": jnp.asarray(rng.standard_normal((n, d)), jnp.float32),
                "r_chosen": jnp.asarray(rng.standard_normal(n), jnp.float32),
                "r_rejected": jnp.asarray(rng.standard_normal(n), jnp.float32)}
    batch = {"filler_chosen": jnp.asarray(rng.integers(0, 30, n), jnp.float32),
             "filler_rejected": jnp.asarray(rng.integers(0, 30, n), jnp.float32),
             "weight": jnp.ones(n)}
    return features, batch


def test_club_penalty_matches_the_spec_equation_and_its_inner_loop_is_adamw():
    config = dir_cfg(q_hidden=5, gamma=0.7, inner_steps=3, attributes=["greater:filler"], attribute_weights=[1.0])
    hook = CLUBPenalty(config)
    features, batch = fake_batch()
    aux = hook.init(jax.random.key(0), 6)
    # L = gamma * [1/N sum_i log q(a_i|z_i) - 1/N^2 sum_ij log q(a_j|z_i)], z = h_w - h_l (spec 1.3)
    z = np.asarray(features["h_chosen"] - features["h_rejected"])
    a = (np.asarray(batch["filler_chosen"]) > np.asarray(batch["filler_rejected"])).astype(int)
    log_q = np.asarray(jax.nn.log_softmax(mlp_apply(aux["q"][0], jnp.asarray(z))), np.float64)
    reference = log_q[np.arange(8), a].mean() - np.mean([log_q[i, a[j]] for i in range(8) for j in range(8)])
    term, metrics = hook.loss(aux, features, batch, 0)
    assert float(term) == pytest.approx(0.7 * reference, abs=1e-5)
    assert float(metrics["dir/mi"]) == pytest.approx(reference, abs=1e-5)
    # code-faithful groups of 4: the mean of the two groups' estimates
    groups = [log_q[s][np.arange(4), a[s]].mean() - np.mean([log_q[s][i, a[s][j]] for i in range(4) for j in range(4)])
              for s in (slice(0, 4), slice(4, 8))]
    assert float(grouped_club(jnp.asarray(log_q), jnp.asarray(a), jnp.ones(8), 4)) == pytest.approx(np.mean(groups),
                                                                                                   abs=1e-5)
    # the inner loop: 3 AdamW steps (b 0.9/0.999, wd 0.01) on -mean log q(a|z)
    new, _ = hook.update(aux, features, batch, None, 0)
    optimizer = optax.adamw(config.dir.q_lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)
    q, state = aux["q"], optimizer.init(aux["q"])

    @jax.jit
    def adamw_step(q, state):
        grads = jax.grad(lambda p: -jnp.mean(jax.nn.log_softmax(mlp_apply(p[0], jnp.asarray(z)))[np.arange(8), a]))(q)
        updates, state = optimizer.update(grads, state, q)
        return optax.apply_updates(q, updates), state

    for _ in range(3):
        q, state = adamw_step(q, state)
    for x, y in zip(jax.tree.leaves(new["q"]), jax.tree.leaves(q)):
        np.testing.assert_allclose(x, y, atol=1e-6)
    # gradient flow: the penalty moves z (the RM) and never q; the estimator's loss never moves z
    g_z = jax.grad(lambda h: hook.loss(jax.lax.stop_gradient(aux), dict(features, h_chosen=h), batch, 0)[0])(
        features["h_chosen"])
    assert float(jnp.abs(g_z).max()) > 0
    g_feat = jax.grad(lambda h: sum(x.sum() for x in jax.tree.leaves(
        hook.update(aux, dict(features, h_chosen=h), batch, None, 0)[0]["q"])))(features["h_chosen"])
    assert float(jnp.abs(g_feat).max()) == 0.0


def test_multi_attribute_sum_pearson_and_product_of_experts_by_hand():
    config = dir_cfg(q_hidden=0, gamma=2.0, attributes=["greater:filler", "band:filler:10:20"],
                     attribute_weights=[1.0, 0.5])
    features, batch = fake_batch(seed=1)
    hook = CLUBPenalty(config)
    aux = hook.init(jax.random.key(1), 6)
    mis = hook.estimates(aux["q"], features, batch)
    assert len(aux["q"]) == 2 and aux["q"][1][0]["w"].shape == (6, 3)
    assert float(hook.loss(aux, features, batch, 0)[0]) == pytest.approx(2.0 * (float(mis[0]) + 0.5 * float(mis[1])),
                                                                        abs=1e-5)
    pearson = PearsonPenalty(dir_cfg(gamma=3.0, attributes=["greater:filler"], attribute_weights=[1.0]))
    r = np.concatenate([features["r_chosen"], features["r_rejected"]])
    v = np.concatenate([batch["filler_chosen"], batch["filler_rejected"]])
    assert float(pearson.loss({}, features, batch, 0)[0]) == pytest.approx(3.0 * abs(np.corrcoef(r, v)[0, 1]), abs=1e-5)
    poe = ProductOfExperts(dir_cfg(attributes=["greater:filler"], attribute_weights=[1.0]))
    beta = {"beta": jnp.asarray([0.8]), "opt": None}
    s = np.sign(np.asarray(batch["filler_chosen"]) - np.asarray(batch["filler_rejected"]))
    logit = np.asarray(features["r_chosen"] - features["r_rejected"]) + 0.8 * s
    assert float(poe.loss(beta, features, batch, 0)[0]) == pytest.approx(np.mean(np.log1p(np.exp(-logit))), abs=1e-5)
    # the expert learns the bias direction: chosen longer in every pair -> beta grows
    longer = dict(batch, filler_chosen=batch["filler_rejected"] + 5)
    aux = poe.init(None, 6)
    for _ in range(3):
        aux, _ = poe.update(aux, features, longer, None, 0)
    assert float(aux["beta"][0]) > 0.1


def test_table_smoke_run_with_dir_and_its_rm_as_a_reward(tmp_path):
    workdir = tmp_path / "point"
    command = [sys.executable, "-m", "shared.launch", "--config=experiments/dir_debias/small_scale.py:smoke",
               f"--workdir={workdir}", '--config.rm.loss_hooks=["dir_debias/club"]', "--config.dir.club_batch=8"]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    summary = json.loads((workdir / "summary.json").read_text())
    for key in ("eval/aligned/accuracy", "eval/anti/accuracy", "eval/bias_gap", "probe/linear_acc", "mi/club",
                "bon/quality", "train/dir/mi", "eval/balanced/spearman_dr_dv"):
        assert np.isfinite(summary[key]), key
    assert summary["seeds"] == [0] and summary["per_seed/eval/bias_gap"] == [summary["eval/bias_gap"]]
    assert summary["eval/bias_gap"] == pytest.approx(summary["eval/aligned/accuracy"] - summary["eval/anti/accuracy"])
    reward = REWARDS.get("model/scalar_rm")(path=str(workdir / "seed0"), batch_size=8)
    scores = reward(["abcd|"] * 2, ["ab!!", "cd"])
    assert len(scores) == 2 and all(np.isfinite(scores))
