"""Hand-written numpy forwards of the spec's equations (../shared/papers/siamesenorm.md), one per block.

Independent of the JAX code except for parameter names: `params` is the Decoder's pure dict (stacked layers),
`cfg` the model config. Every function returns logits [B,T,V] (tied embeddings).
"""
from __future__ import annotations

import math

import numpy as np


def rms(x, gain, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain


def rope(x, theta):
    """x [B,T,H,D], positions 0..T-1, rotate-half layout."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2) / d)
    angles = np.arange(x.shape[1])[:, None] * inv  # [T, D/2]
    cos = np.concatenate([np.cos(angles)] * 2, -1)[None, :, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, -1)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + np.concatenate([-x2, x1], -1) * sin


def attention(x, p, cfg, *, qk_norm, v_norm=False):
    eps = cfg.norm_eps
    q = np.einsum("btd,dhk->bthk", x, p["q"])
    k = np.einsum("btd,dhk->bthk", x, p["k"])
    v = np.einsum("btd,dhk->bthk", x, p["v"])
    if qk_norm:
        q, k = rms(q, p["q_norm"]["scale"], eps), rms(k, p["k_norm"]["scale"], eps)
    if v_norm:
        v = rms(v, p["v_norm"]["scale"], eps)
    q, k = rope(q, cfg.rope_theta), rope(k, cfg.rope_theta)
    group = cfg.n_heads // cfg.n_kv_heads
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    scores = np.einsum("bthd,bshd->bhts", q, k) / math.sqrt(cfg.head_dim)
    t = x.shape[1]
    scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    out = np.einsum("bhts,bshd->bthd", probs, v)
    return np.einsum("bthk,hkd->btd", out, p["o"])


def mlp(x, p):
    gate = x @ p["gate"]
    return (gate / (1 + np.exp(-gate)) * (x @ p["up"])) @ p["down"]


def divisor(mode, b, s):
    return {"block": math.sqrt(2 * (b + 1)), "sublayer": math.sqrt(2 * b + s + 1), "none": 1.0}[mode]


def forward(name, params, cfg, tokens, options):
    """Logits of block `name` ("siamesenorm/<x>") with block `options`."""
    eps, n = cfg.norm_eps, cfg.n_layers
    h = params["embed"][tokens]
    layers = [{k: _take(v, b) for k, v in params["layers"].items()} for b in range(n)]
    N = lambda x, p: rms(x, p["scale"], eps)  # noqa: E731
    qk = bool(cfg.qk_norm)

    def attn(x, p, hybrid=False):
        return attention(x, p, cfg, qk_norm=qk or hybrid, v_norm=hybrid and options["v_norm"])

    kind = name.split("/")[-1]
    final_norm = True
    if kind == "siamese":  # §1.2
        mode = "block" if options["depth_scaling"] == "auto" else options["depth_scaling"]
        x, y = h, h
        for b, p in enumerate(layers):
            for s, (pre, post, inp, f) in enumerate([("attn_pre", "attn_post", "attn_in", lambda z: attn(z, p["attn"])),
                                                     ("mlp_pre", "mlp_post", "mlp_in", lambda z: mlp(z, p["mlp"]))]):
                xn = N(x, p[post])
                z = xn + N(y, p[pre])
                o = f(N(z, p[inp]) if options["input_norm"] else z)
                x, y = xn + o / divisor(mode, b, s), y + o
        x = _readout(x, y, layers[-1], options, N)
    elif kind == "siamese_hybrid":  # §1.4
        mode = "block" if options["depth_scaling"] == "auto" else options["depth_scaling"]
        x, y = h, h
        for b, p in enumerate(layers):
            o = attn(x * p["attn_x_gain"]["scale"] + N(y, p["attn_y_norm"]), p["attn"], hybrid=True)
            x, y = x + o / divisor(mode, b, 0), y + o
            x = N(x, p["mlp_x_norm"])
            z = x + N(y, p["mlp_y_norm"])
            u = mlp(N(z, p["mlp_in"]) if options["input_norm"] else z, p["mlp"])
            x, y = x + u / divisor(mode, b, 1), y + u
        x = _readout(x, y, layers[-1], options, N)
    elif kind == "hybridnorm":  # §3.6, HybridNorm* and depth scaling as options
        mode = "none" if options["depth_scaling"] == "auto" else options["depth_scaling"]
        x = h
        for b, p in enumerate(layers):
            star = options["hybrid_first_prenorm"] and b == 0
            x = x + attn(N(x, p["attn_norm"]) if star else x, p["attn"], hybrid=True) / divisor(mode, b, 0)
            if star:
                x = x + mlp(N(x, p["mlp_norm"]), p["mlp"]) / divisor(mode, b, 1)
            else:
                x = N(x, p["mlp_norm"])
                x = x + mlp(x, p["mlp"]) / divisor(mode, b, 1)
    elif kind == "deepnorm":  # §3.3
        alpha, final_norm, x = (2 * n) ** 0.25, False, h
        for p in layers:
            x = N(alpha * x + attn(x, p["attn"]), p["attn_norm"])
            x = N(alpha * x + mlp(x, p["mlp"]), p["mlp_norm"])
    elif kind == "mixln":  # §3.4
        n_post, x = math.floor(options["mixln_post_fraction"] * n), h
        for b, p in enumerate(layers):
            if b < n_post:
                x = N(x + attn(x, p["attn"]), p["attn_norm"])
                x = N(x + mlp(x, p["mlp"]), p["mlp_norm"])
            else:
                x = x + attn(N(x, p["attn_norm"]), p["attn"])
                x = x + mlp(N(x, p["mlp_norm"]), p["mlp"])
    elif kind == "periln":  # §3.5
        x = N(h, layers[0]["embed_norm"]) if options["periln_embed_norm"] else h
        for p in layers:
            x = x + N(attn(N(x, p["attn_in"]), p["attn"]), p["attn_out"])
            x = x + N(mlp(N(x, p["mlp_in"]), p["mlp"]), p["mlp_out"])
    elif kind == "residual":  # §3.8
        xp, xd, final_norm = h, (np.zeros_like(h) if options["residual_dual_init"] == "zeros" else h), False
        for p in layers:
            o = attn(xp, p["attn"])
            xp, xd = N(xp + o, p["attn_norm"]), xd + o
            o = mlp(xp, p["mlp"])
            xp, xd = N(xp + o, p["mlp_norm"]), xd + o
        x = xp + N(xd, layers[-1]["dual_norm"])
    else:
        raise KeyError(name)
    if final_norm:
        x = N(x, params["final_norm"])
    return x @ params["embed"].T


def _readout(x, y, last, options, N):
    readout = options["readout"]
    if readout == "x":
        return N(x, last["readout_x"])
    if readout == "y":
        return N(y, last["readout_y"])
    return N(x, last["readout_x"]) + N(y, last["readout_y"])


def _take(tree, b):
    if isinstance(tree, dict):
        return {k: _take(v, b) for k, v in tree.items()}
    return np.asarray(tree[b], np.float64)
