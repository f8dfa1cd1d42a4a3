"""GPU time of the pieces of one decode step, in alternative formulations (what to change in the sampler).

Each variant runs `--iters` times inside one jitted `fori_loop` (weights loop-invariant, as in the sampler's
decode loop; the input fed back so no iteration can be hoisted); one call is traced with the JAX profiler and
the summed GPU kernel time is divided by the iteration count. Shapes default to the Qwen2.5-0.5B decode step at
batch 256 with a 384-slot cache.

    python -m bench.decode_kernels --out=$OUT/decode_kernels.json
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import tempfile
import time


def _head_kernel(hidden_ref, weight_ref, max_ref, index_ref, sumexp_ref, *, vocab: int, width: int,
                 block_v: int, block_k: int):
    from jax.experimental.pallas import triton as plgpu
    from jax.experimental import pallas as pl
    import jax
    import jax.numpy as jnp

    part = pl.program_id(0)
    rows = part * block_v + jnp.arange(block_v)

    def step(i, acc):  # a loop (not unrolled) so that Triton pipelines the loads over num_stages
        k0 = pl.multiple_of(i * block_k, block_k)
        x = hidden_ref[:, pl.ds(k0, block_k)]
        w = plgpu.load(weight_ref.at[pl.ds(part * block_v, block_v), pl.ds(k0, block_k)],
                       mask=(rows < vocab)[:, None], other=0.0)
        return acc + jax.lax.dot_general(x, w, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)

    acc = jax.lax.fori_loop(0, width // block_k, step,
                            jnp.zeros((hidden_ref.shape[0], block_v), jnp.float32))
    acc = jnp.where((rows < vocab)[None, :], acc, -jnp.inf)
    top = jnp.max(acc, axis=1)
    first = jnp.min(jnp.where(acc == top[:, None], rows[None, :], jnp.iinfo(jnp.int32).max), axis=1)
    total = jnp.sum(jnp.exp(acc - top[:, None]), axis=1)
    max_ref[...] = top
    index_ref[...] = first
    sumexp_ref[...] = total


def head_argmax_and_logsumexp(hidden, weight, *, interpret: bool = False, block_v: int = 128, block_k: int = 64,
                              num_warps: int = 8, num_stages: int = 3):
    """(argmax [B] int32, logsumexp [B] float32) of the logits hidden [B,D] @ weight[V,D]^T, never written out:
    one program per `block_v` vocabulary rows computes its [B, block_v] logits tile (all B rows; B a power of
    two) and keeps per-row (max, first index of the max, sum of exp); the per-tile triples are merged in XLA.
    Experimental (measured slower than cuBLAS + shared.model.vocab_kernel at the 0.5B decode shape)."""
    from jax.experimental import pallas as pl

    from shared.model.vocab_kernel import merge_tiles, tile_triples
    b, d = hidden.shape
    v = weight.shape[0]
    if d % block_k:
        raise ValueError(f"head_argmax_and_logsumexp: model dim {d} is not a multiple of block_k={block_k}")
    parts = pl.cdiv(v, block_v)
    compiler_params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        compiler_params = plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    part_spec = pl.BlockSpec((None, b), lambda j: (j, 0))
    tops, firsts, sums = pl.pallas_call(
        functools.partial(_head_kernel, vocab=v, width=d, block_v=block_v, block_k=block_k),
        grid=(parts,),
        in_specs=[pl.BlockSpec((b, d), lambda j: (0, 0)), pl.BlockSpec((v, d), lambda j: (0, 0))],
        out_specs=[part_spec, part_spec, part_spec],
        out_shape=tile_triples((parts, b)),
        compiler_params=compiler_params,
        interpret=interpret,
        name="head_argmax_logsumexp",
    )(hidden, weight)
    return merge_tiles(tops, firsts, sums, axis=0)


def gate_up_silu(x, w, *, block_m: int = 64, block_n: int = 64, block_k: int = 64, num_warps: int = 4,
                 num_stages: int = 3, interpret: bool = False):
    """silu(x @ w[:, 0]) * (x @ w[:, 1]) for x [M,D] and packed w [D,2,F] in one Pallas kernel: the [M,2F] GEMM
    output never goes to memory (experimental: is a Pallas GEMM with the SwiGLU epilogue faster than XLA's
    GEMM + multiply fusion at decode shapes?)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    m, d = x.shape
    f = w.shape[2]

    def kernel(x_ref, w_ref, o_ref):
        def step(i, accs):
            gate, up = accs
            k0 = pl.multiple_of(i * block_k, block_k)
            xs = x_ref[:, pl.ds(k0, block_k)]
            gate = gate + jnp.dot(xs, w_ref[pl.ds(k0, block_k), 0, :], preferred_element_type=jnp.float32)
            up = up + jnp.dot(xs, w_ref[pl.ds(k0, block_k), 1, :], preferred_element_type=jnp.float32)
            return gate, up

        zeros = jnp.zeros((block_m, block_n), jnp.float32)
        gate, up = jax.lax.fori_loop(0, d // block_k, step, (zeros, zeros))
        o_ref[...] = (jax.nn.silu(gate) * up).astype(o_ref.dtype)

    params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        params = plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    return pl.pallas_call(
        kernel, grid=(m // block_m, f // block_n),
        in_specs=[pl.BlockSpec((block_m, d), lambda i, j: (i, 0)), pl.BlockSpec((d, 2, block_n), lambda i, j: (0, 0, j))],
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, f), x.dtype), compiler_params=params, interpret=interpret,
        name="gate_up_silu")(x, w)


def build_variants(b: int, s: int, d: int, h: int, kv: int, hd: int, f: int, v: int, attn_layers: int = 8):
    import jax
    import jax.numpy as jnp

    from shared.model.layers import xla_attention
    from shared.model.sampler import _argmax_and_logsumexp

    bf = jnp.bfloat16
    keys = iter(jax.random.split(jax.random.key(0), 32))

    def rand(*shape, scale=0.02):
        return (scale * jax.random.normal(next(keys), shape, jnp.float32)).astype(bf)

    x = rand(b, 1, d, scale=1.0)
    w_gate, w_up, w_down = rand(d, f), rand(d, f), rand(f, d)
    w_q, w_k, w_v, w_o = rand(d, h, hd), rand(d, kv, hd), rand(d, kv, hd), rand(h, hd, d)
    embed = rand(v, d)
    # one cache per layer, so the attention variants stream them from HBM as a decode step does (one layer's
    # cache alone would sit in L2)
    caches_k = [rand(b, s, kv, hd, scale=1.0) for _ in range(attn_layers)]
    caches_v = [rand(b, s, kv, hd, scale=1.0) for _ in range(attn_layers)]
    valid = jnp.arange(s)[None, :] < (s * 3) // 4                      # [1,S]: 3/4 of the slots written
    mask = jnp.broadcast_to(valid[:, None, None, :], (b, 1, 1, s))
    q = rand(b, 1, h, hd, scale=1.0)

    def mlp_separate(x, w):
        gate = jnp.einsum("btd,df->btf", x, w["gate"])
        up = jnp.einsum("btd,df->btf", x, w["up"])
        return jnp.einsum("btf,fd->btd", jax.nn.silu(gate) * up, w["down"])

    def mlp_concat(x, w):
        gate_up = jnp.einsum("btd,df->btf", x, w["gate_up"])
        gate, up = jnp.split(gate_up, 2, axis=-1)
        return jnp.einsum("btf,fd->btd", jax.nn.silu(gate) * up, w["down"])

    def mlp_stacked(x, w):
        gate_up = jnp.einsum("btd,dcf->cbtf", x, w["gate_up_stacked"])
        return jnp.einsum("btf,fd->btd", jax.nn.silu(gate_up[0]) * gate_up[1], w["down"])

    def mlp_stacked_down_split(x, w, splits):
        """the down GEMM as `splits` partial GEMMs over slices of d_ff (one batched GEMM), summed in f32: more
        thread blocks than the [256 x 896] output alone gives a GEMM at M = 256"""
        gate_up = jnp.einsum("btd,dcf->cbtf", x, w["gate_up_stacked"])
        hidden = jax.nn.silu(gate_up[0]) * gate_up[1]
        hidden = hidden.reshape(*hidden.shape[:2], splits, f // splits)
        parts = jnp.einsum("btsf,sfd->btsd", hidden, w["down"].reshape(splits, f // splits, d),
                           preferred_element_type=jnp.float32)
        return parts.sum(2).astype(x.dtype)

    def mlp_pallas_gate_up(x, w, **kw):
        hidden = gate_up_silu(x[:, 0], w["gate_up_stacked"], **kw)[:, None]
        return jnp.einsum("btf,fd->btd", hidden, w["down"])

    mlp_w = {"gate": w_gate, "up": w_up, "down": w_down, "gate_up": jnp.concatenate([w_gate, w_up], 1),
             "gate_up_stacked": jnp.stack([w_gate, w_up], 1)}

    def qkvo_separate(x, w):
        qq = jnp.einsum("btd,dhk->bthk", x, w["q"])
        kk = jnp.einsum("btd,dhk->bthk", x, w["k"])
        vv = jnp.einsum("btd,dhk->bthk", x, w["v"])
        mix = qq + jnp.tile(kk + vv, (1, 1, h // kv, 1))
        return jnp.einsum("bthk,hkd->btd", mix, w["o"])

    def qkvo_concat(x, w):
        qkv = jnp.einsum("btd,dhk->bthk", x, w["qkv"])
        qq, kk, vv = qkv[:, :, :h], qkv[:, :, h:h + kv], qkv[:, :, h + kv:]
        mix = qq + jnp.tile(kk + vv, (1, 1, h // kv, 1))
        return jnp.einsum("bthk,hkd->btd", mix, w["o"])

    qkv_w = {"q": w_q, "k": w_k, "v": w_v, "o": w_o, "qkv": jnp.concatenate([w_q, w_k, w_v], 1)}

    def attn_current(qx, k, v, w):
        return xla_attention(qx, k, v, w["mask"])

    def attn_bf16_scores(qx, k, v, w):
        g = h // kv
        qr = qx.reshape(b, 1, kv, g, hd)
        scores = jnp.einsum("btkgd,bskd->bkgts", qr, k).astype(jnp.float32) / math.sqrt(hd)
        scores = jnp.where(w["mask"][:, :, None], scores, -1e30)
        probs = jax.nn.softmax(scores, axis=-1).astype(bf)
        return jnp.einsum("bkgts,bskd->btkgd", probs, v).reshape(b, 1, h, hd)

    def attn_cudnn(qx, k, v, w):
        return jax.nn.dot_product_attention(qx, k, v, mask=w["mask"], implementation="cudnn")

    def attn_pallas(qx, k, v, w, num_warps=4, block_slots=64):
        from shared.model.decode_attention import decode_attention
        start = jnp.zeros((b,), jnp.int32)
        end = jnp.full((b,), (s * 2) // 3, jnp.int32)   # 256 of 384: the mean context of a 128 + 256 decode
        return decode_attention(qx[:, 0], k, v, start, end, num_warps=num_warps, block_slots=block_slots)[:, None]

    def over_layers(fn):
        def run(qx, w):
            for k, v in zip(w["ks"], w["vs"]):
                qx = qx + fn(qx, k, v, w) * 1e-3
            return qx
        return run

    attn_w = {"ks": caches_k, "vs": caches_v, "mask": mask}

    def fused_over_layers(num_warps=4, num_stages=2, block_slots=64):
        """the fused kernel (RoPE + this step's K/V slot write + attention) over the layer caches, which ride in
        the loop carry as in the sampler (the slot write is in place)"""
        from shared.model.decode_attention import fused_decode_attention
        inv_freq = 1.0 / (1e6 ** (jnp.arange(0, hd, 2, dtype=jnp.float32) / hd))
        start = jnp.zeros((b,), jnp.int32)
        slot = jnp.full((b,), (s * 2) // 3, jnp.int32)   # 256 of 384 slots visible, as attn/pallas

        def run(carry, w):
            qkv, ks, vs = carry
            new_ks, new_vs = [], []
            for k, v in zip(ks, vs):
                out, k, v = fused_decode_attention(qkv, k, v, start, slot, slot, inv_freq, heads=h,
                                                   num_warps=num_warps, num_stages=num_stages,
                                                   block_slots=block_slots)
                qkv = qkv + jnp.pad(out, ((0, 0), (0, 2 * kv), (0, 0))) * 1e-3
                new_ks.append(k)
                new_vs.append(v)
            return qkv, new_ks, new_vs
        return run

    fused_x = (rand(b, h + 2 * kv, hd, scale=1.0), caches_k, caches_v)

    def head_current(hid, w):
        logits = jnp.einsum("bd,vd->bv", hid, w["embed"]).astype(jnp.float32)
        return _argmax_and_logsumexp(logits)

    def head_f32_out(hid, w):
        logits = jnp.einsum("bd,vd->bv", hid, w["embed"], preferred_element_type=jnp.float32)
        return _argmax_and_logsumexp(logits)

    def head_transposed(hid, w):
        logits = jnp.einsum("bd,dv->bv", hid, w["embed_t"]).astype(jnp.float32)
        return _argmax_and_logsumexp(logits)

    def head_chunks(hid, w, chunks):
        logits = jnp.einsum("bd,vd->bv", hid, w["embed"]).astype(jnp.float32)
        return _argmax_and_logsumexp(logits, chunks)

    def head_direct(hid, w):
        """argmax and max as sibling reductions of one pass, then the sum of exp: no chunking."""
        logits = jnp.einsum("bd,vd->bv", hid, w["embed"]).astype(jnp.float32)
        top = logits.max(-1)
        return jnp.argmax(logits, -1), top + jnp.log(jnp.exp(logits - top[:, None]).sum(-1))

    def head_pallas(hid, w, tile):
        from shared.model.vocab_kernel import argmax_and_logsumexp
        return argmax_and_logsumexp(jnp.einsum("bd,vd->bv", hid, w["embed"]), tile=tile)

    def head_fused(hid, w, **kw):
        return head_argmax_and_logsumexp(hid, w["embed"], **kw)

    def head_gemm_only(hid, w):
        logits = jnp.einsum("bd,vd->bv", hid, w["embed"])
        return jnp.argmax(logits[:, :8], -1), logits[:, 0].astype(jnp.float32)

    head_w = {"embed": embed, "embed_t": embed.T}

    def feed_row(x, y):  # x [B,1,D]; y anything [B,...]: a cheap dependency of the next input on this output
        return x + (y.reshape(y.shape[0], -1)[:, :1].astype(x.dtype)[:, None] * 1e-3)

    variants = {}
    for name, fn in [("mlp/separate", mlp_separate), ("mlp/concat", mlp_concat), ("mlp/stacked", mlp_stacked)] + [
            (f"mlp/stacked_down_split{n}", functools.partial(mlp_stacked_down_split, splits=n)) for n in (2, 4, 8)] + [
            (f"mlp/pallas_m{bm}_n{bn}_k{bk}_w{nw}_s{ns}", functools.partial(
                mlp_pallas_gate_up, block_m=bm, block_n=bn, block_k=bk, num_warps=nw, num_stages=ns))
            for bm, bn, bk, nw, ns in [(64, 64, 64, 4, 3), (64, 128, 64, 4, 3), (128, 64, 64, 4, 3),
                                       (64, 64, 128, 4, 2), (32, 64, 64, 4, 4), (64, 32, 128, 4, 3),
                                       (128, 128, 64, 8, 3), (256, 32, 64, 8, 3)]]:
        variants[name] = (lambda fn: lambda x, w: feed_row(x, fn(x, w)))(fn), x, mlp_w
    for name, fn in [("qkvo/separate", qkvo_separate), ("qkvo/concat", qkvo_concat)]:
        variants[name] = (lambda fn: lambda x, w: feed_row(x, fn(x, w)))(fn), x, qkv_w
    pallas = functools.partial
    for name, fn in [("attn/current", attn_current), ("attn/bf16_scores", attn_bf16_scores),
                     ("attn/cudnn", attn_cudnn), ("attn/pallas", attn_pallas),
                     ("attn/pallas_w2", pallas(attn_pallas, num_warps=2)),
                     ("attn/pallas_b32", pallas(attn_pallas, block_slots=32)),
                     ("attn/pallas_b128", pallas(attn_pallas, block_slots=128))]:
        variants[name] = over_layers(fn), q, attn_w
    for nw, ns, bs in [(4, 2, 64), (2, 2, 64), (8, 2, 64), (4, 3, 64), (4, 4, 64), (2, 3, 64), (4, 2, 128),
                       (8, 3, 128), (4, 3, 32), (2, 4, 32)]:
        variants[f"attn/fused_w{nw}_s{ns}_b{bs}"] = fused_over_layers(nw, ns, bs), fused_x, {}
    for name, fn in [("head/current", head_current), ("head/f32_out", head_f32_out),
                     ("head/transposed", head_transposed), ("head/direct", head_direct),
                     ("head/chunks1", functools.partial(head_chunks, chunks=1)),
                     ("head/chunks8", functools.partial(head_chunks, chunks=8)),
                     ("head/chunks32", functools.partial(head_chunks, chunks=32)),
                     ("head/pallas_t2048", functools.partial(head_pallas, tile=2048)),
                     ("head/pallas_t4096", functools.partial(head_pallas, tile=4096)),
                     ("head/pallas_t8192", functools.partial(head_pallas, tile=8192)),
                     ("head/gemm_only", head_gemm_only)] + [
                         (f"head/fused_v{bv}_k{bk}_w{nw}_s{ns}",
                          functools.partial(head_fused, block_v=bv, block_k=bk, num_warps=nw, num_stages=ns))
                         for bv, bk, nw, ns in [(128, 64, 8, 3), (64, 64, 4, 3), (64, 128, 8, 2), (128, 128, 8, 2),
                                                (32, 128, 4, 3), (128, 32, 8, 4), (64, 64, 8, 4)]]:
        variants[name] = ((lambda fn: lambda hid, w: hid + fn(hid, w)[1][:, None].astype(hid.dtype) * 1e-6)(fn),
                          x[:, 0], head_w)
    variants["feedback_only"] = (lambda x, w: feed_row(x, x * 2), x, {})
    return variants


def _rms_normalizer(x_ref, k: int, block_k: int, eps: float):
    """[rows] float32 1 / sqrt(mean(x^2) + eps) of a program's rows, streamed over K blocks."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def sum_squares(i, acc):
        xs = x_ref[:, pl.ds(pl.multiple_of(i * block_k, block_k), block_k)].astype(jnp.float32)
        return acc + jnp.sum(xs * xs, axis=1)

    total = jax.lax.fori_loop(0, k // block_k, sum_squares, jnp.zeros((x_ref.shape[0],), jnp.float32))
    return jax.lax.rsqrt(total / k + eps)


def norm_fused_matmul(x, scale, w, bias=None, *, eps: float, tiles: tuple, swiglu: bool = False,
                      fold_scale: bool = False, interpret: bool = False):
    """Experimental (measured slower than XLA's norm fusion + GEMM at the 0.5B decode shapes): RMSNorm(x) @ w
    (+ bias) in one Pallas kernel, the norm applied to each K block of x before its dot; with `swiglu` w is the
    packed [K,2,F] gate/up weight and the output silu(gate) * up. `fold_scale`: the norm scale is assumed folded
    into w already and only the per-row 1/rms multiplies the accumulator (x goes to the dot untouched)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    block_m, block_n, block_k, num_warps, num_stages = tiles
    (m, k), n = x.shape, w.shape[-1]

    def kernel(x_ref, scale_ref, w_ref, *rest):
        o_ref = rest[-1]
        inv = _rms_normalizer(x_ref, k, block_k, eps)

        def operand(k0):
            cols = pl.ds(k0, block_k)
            if fold_scale:
                return x_ref[:, cols]
            xs = x_ref[:, cols].astype(jnp.float32) * inv[:, None]
            return (xs * scale_ref[cols].astype(jnp.float32)[None, :]).astype(x_ref.dtype)

        def step(i, accs):
            k0 = pl.multiple_of(i * block_k, block_k)
            xs, rows = operand(k0), pl.ds(k0, block_k)
            if swiglu:
                return (accs[0] + jnp.dot(xs, w_ref[rows, 0, :], preferred_element_type=jnp.float32),
                        accs[1] + jnp.dot(xs, w_ref[rows, 1, :], preferred_element_type=jnp.float32))
            return (accs[0] + jnp.dot(xs, w_ref[rows, :], preferred_element_type=jnp.float32),)

        zeros = jnp.zeros(o_ref.shape, jnp.float32)
        accs = jax.lax.fori_loop(0, k // block_k, step, (zeros, zeros) if swiglu else (zeros,))
        if fold_scale:
            accs = tuple(acc * inv[:, None] for acc in accs)
        dt = o_ref.dtype
        y = accs[0].astype(dt)
        if swiglu:
            gate, up = (acc.astype(dt).astype(jnp.float32) for acc in accs)
            y = (gate * jax.nn.sigmoid(gate) * up).astype(dt)
        if bias is not None:
            y = (y.astype(jnp.float32) + rest[0][...].astype(jnp.float32)[None, :]).astype(dt)
        o_ref[...] = y

    w_block = (k, 2, block_n) if swiglu else (k, block_n)
    in_specs = [pl.BlockSpec((block_m, k), lambda i, j: (i, 0)), pl.BlockSpec((k,), lambda i, j: (0,)),
                pl.BlockSpec(w_block, lambda i, j: (0,) * (len(w_block) - 1) + (j,))]
    args = [x, scale, w]
    if bias is not None:
        in_specs.append(pl.BlockSpec((block_n,), lambda i, j: (j,)))
        args.append(bias)
    params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        params = plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    return pl.pallas_call(kernel, grid=(m // block_m, n // block_n), in_specs=in_specs,
                          out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
                          out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), compiler_params=params,
                          interpret=interpret, name="norm_fused_matmul")(*args)


PROJECTION_TILES = {  # (block_m, block_n, block_k, num_warps, num_stages) tried per projection at M = 256
    "qkv": [(64, 64, 128, 4, 3), (32, 64, 128, 4, 3), (64, 32, 128, 4, 3), (32, 32, 128, 4, 3),
            (16, 64, 128, 4, 3), (64, 32, 64, 4, 4), (64, 32, 128, 4, 4), (64, 32, 128, 8, 3)],
    "o": [(64, 64, 128, 4, 3), (32, 64, 128, 4, 3), (64, 32, 128, 4, 3), (32, 32, 128, 4, 3),
          (64, 32, 64, 4, 4), (64, 32, 128, 4, 4), (64, 32, 128, 8, 3), (128, 32, 128, 4, 3)],
    "down": [(64, 32, 128, 4, 3), (64, 64, 256, 8, 3)],
    "down_split_k": [(2, (64, 64, 128, 4, 4)), (4, (64, 64, 64, 4, 4)), (4, (64, 32, 64, 4, 4)),
                     (4, (128, 64, 64, 8, 3)), (8, (64, 64, 32, 4, 4)), (8, (64, 128, 32, 4, 4)),
                     (4, (64, 128, 64, 4, 3)), (2, (64, 128, 128, 4, 3)), (19, (64, 64, 256, 4, 3)),
                     (19, (128, 128, 256, 8, 3))],
    "norm_fused": [(16, 64, 128, 4, 3), (32, 64, 128, 4, 3)],
    "norm_fused_swiglu": [(64, 128, 64, 4, 3), (128, 128, 64, 8, 3)],
}


def build_projection_variants(b: int, d: int, h: int, kv: int, hd: int, f: int, layers: int, eps: float = 1e-6):
    """The decode step's projections with their bias / residual / norm / SwiGLU neighbours as XLA ops and as
    Pallas kernels (shared.model.decode_matmul; this file's experimental norm-fused ones) over tile choices, run
    over `layers` distinct weight sets per iteration (streamed from HBM as in a decode step; one set would sit in
    L2), and the attention-less layer both ways. Times are per layer."""
    import jax
    import jax.numpy as jnp

    from shared.model import decode_matmul as dm

    bf = jnp.bfloat16
    keys = iter(jax.random.split(jax.random.key(1), 8 * layers + 8))
    n_qkv = (h + 2 * kv) * hd

    def rand(*shape, scale=0.02):
        return (scale * jax.random.normal(next(keys), shape, jnp.float32)).astype(bf)

    weights = [{"qkv": rand(d, n_qkv), "bias": rand(n_qkv), "o": rand(h * hd, d), "gate_up": rand(d, 2, f),
                "down": rand(f, d), "norm1": 1.0 + rand(d).astype(jnp.float32),
                "norm2": 1.0 + rand(d).astype(jnp.float32)} for _ in range(layers)]
    x = rand(b, d, scale=1.0)
    hidden = rand(b, f, scale=1.0)

    def norm(x, scale):
        x32 = x.astype(jnp.float32)
        return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + eps) * scale).astype(x.dtype)

    def feed(x, y):  # the next layer's input depends on this output (nothing hoisted), the same for every variant
        return x + y[:, :1].astype(x.dtype) * 1e-3

    def over_layers(op):
        def run(x, ws):
            for w in ws:
                x = feed(x, op(x, w))
            return x
        return run

    def label(tiles):
        return "m{}_n{}_k{}_w{}_s{}".format(*tiles)

    ops = {
        "qkv/xla": lambda x, w: jnp.dot(norm(x, w["norm1"]), w["qkv"]) + w["bias"],
        "o/xla": lambda x, w: x + jnp.dot(x, w["o"]),
        "gate_up/xla": lambda x, w: (lambda gu: jax.nn.silu(gu[:, 0]) * gu[:, 1])(
            jnp.einsum("md,dcf->mcf", norm(x, w["norm2"]), w["gate_up"])),
        "down/xla": lambda x, w: x[:, :d] + jnp.dot(x, w["down"]),
    }
    for t in PROJECTION_TILES["qkv"]:
        ops[f"qkv/pallas_{label(t)}"] = functools.partial(
            lambda x, w, t: dm.matmul(norm(x, w["norm1"]), w["qkv"], bias=w["bias"], tiles=t), t=t)
    for t in PROJECTION_TILES["norm_fused"]:
        ops[f"qkv/norm_fused_{label(t)}"] = functools.partial(
            lambda x, w, t: norm_fused_matmul(x, w["norm1"], w["qkv"], w["bias"], eps=eps, tiles=t), t=t)
        ops[f"qkv/norm_folded_{label(t)}"] = functools.partial(
            lambda x, w, t: norm_fused_matmul(x, w["norm1"], w["qkv"], w["bias"], eps=eps, tiles=t,
                                              fold_scale=True), t=t)
    for t in PROJECTION_TILES["o"]:
        ops[f"o/pallas_{label(t)}"] = functools.partial(lambda x, w, t: dm.matmul(x, w["o"], residual=x, tiles=t),
                                                        t=t)
    for t in PROJECTION_TILES["norm_fused_swiglu"]:
        ops[f"gate_up/norm_fused_{label(t)}"] = functools.partial(
            lambda x, w, t: norm_fused_matmul(x, w["norm2"], w["gate_up"], eps=eps, tiles=t, swiglu=True), t=t)
    for t in PROJECTION_TILES["down"]:
        ops[f"down/pallas_{label(t)}"] = functools.partial(
            lambda x, w, t: dm.matmul(x, w["down"], residual=x[:, :d], tiles=t), t=t)
    for splits, t in PROJECTION_TILES["down_split_k"]:
        ops[f"down/split{splits}_{label(t)}"] = functools.partial(
            lambda x, w, t, splits: x[:, :d] + dm.matmul_split_k(x, w["down"], splits=splits, tiles=t).sum(1).astype(
                x.dtype), t=t, splits=splits)

    variants = {f"proj/{name}": (over_layers(op), hidden if name.startswith("down/") else x, weights)
                for name, op in ops.items()}

    def layer(kernels: bool):  # an attention-less layer: the attention output stood in for by q/k/v's q block
        def run(x, ws):
            for w in ws:
                qkv = (dm.matmul(norm(x, w["norm1"]), w["qkv"], bias=w["bias"]) if kernels
                       else jnp.dot(norm(x, w["norm1"]), w["qkv"]) + w["bias"])
                a = qkv[:, :h * hd]
                x = dm.matmul(a, w["o"], residual=x) if kernels else x + jnp.dot(a, w["o"])
                x = jax.lax.optimization_barrier(x)
                x = x + jnp.dot(ops["gate_up/xla"](x, w), w["down"])
            return x
        return run

    variants["proj/layer/xla"] = layer(False), x, weights
    variants["proj/layer/pallas_qkv_o"] = layer(True), x, weights

    from shared.model import decode_norm as dn

    def kernel_layer(norm1: str, norm2: str, rows: int = dn.ROWS, num_warps: int = dn.NUM_WARPS):
        """The sampler's attention-less layer with every projection kernel, the down projection's split-K
        partials carried into the next layer; norm1 ("xla" | "pallas"): the partials' sum + residual add and the
        next RMSNorm as XLA ops or one add_rmsnorm kernel; norm2 the same for the MLP's norm alone."""
        def run(carry, ws):
            x, parts = carry
            for w in ws:
                if norm1 == "pallas":
                    x, normed = dn.add_rmsnorm(x, w["norm1"], partials=parts, rows=rows, num_warps=num_warps)
                else:
                    x = x + parts.sum(1).astype(x.dtype)
                    normed = norm(x, w["norm1"])
                a = dm.matmul(normed, w["qkv"], bias=w["bias"])[:, :h * hd]
                x = jax.lax.optimization_barrier(dm.matmul(a, w["o"], residual=x))
                normed = (dn.add_rmsnorm(x, w["norm2"], rows=rows, num_warps=num_warps) if norm2 == "pallas"
                          else norm(x, w["norm2"]))
                gu = jnp.einsum("md,dcf->mcf", normed, w["gate_up"])
                hid = jax.nn.silu(gu[:, 0]) * gu[:, 1]
                parts = dm.matmul_split_k(hid, w["down"], splits=dm.DOWN_SPLITS, tiles=dm.DOWN_TILES)
            return x, parts
        return run

    carry = (x, jnp.zeros((b, dm.DOWN_SPLITS, d), jnp.float32))
    variants["proj/norms/xla"] = kernel_layer("xla", "xla"), carry, weights
    variants["proj/norms/pallas_add_norm"] = kernel_layer("pallas", "xla"), carry, weights
    for rows, warps in [(1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (4, 4), (8, 8)]:
        variants[f"proj/norms/pallas_both_r{rows}_w{warps}"] = kernel_layer("pallas", "pallas", rows, warps), \
            carry, weights
    variants["proj/feed_only"] = over_layers(lambda x, w: x), x, weights
    return variants


def time_variant(fn, x0, weights, iters: int, per_iter: int = 1) -> dict:
    import jax

    from bench.profile_step import gpu_op_times

    @jax.jit
    def looped(x, w):
        return jax.lax.fori_loop(0, iters, lambda i, x: fn(x, w), x)

    start = time.perf_counter()
    jax.block_until_ready(looped(x0, weights))
    compile_s = time.perf_counter() - start
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(looped(x0, weights))
        walls.append(time.perf_counter() - start)
    trace_dir = tempfile.mkdtemp(prefix="decode_kernels_")
    with jax.profiler.trace(trace_dir):
        jax.block_until_ready(looped(x0, weights))
    totals = gpu_op_times(trace_dir)
    top = sorted(totals.items(), key=lambda kv: -kv[1])[:6]
    n = iters * per_iter
    return {"busy_us_per_iter": sum(totals.values()) / n, "wall_us_per_iter": min(walls) * 1e6 / n,
            "compile_s": compile_s, "top_kernels_us_per_iter": [[name[:90], us / n] for name, us in top]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--slots", type=int, default=384)
    p.add_argument("--dims", default="896,14,2,64,4864,151936", help="d_model,heads,kv_heads,head_dim,d_ff,vocab")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--attn_layers", type=int, default=8,
                   help="attention variants run over this many layer caches per iteration (out of L2, as in decode)")
    p.add_argument("--proj_layers", type=int, default=24,
                   help="projection variants run over this many weight sets per iteration (streamed from HBM)")
    p.add_argument("--only", default="", help="comma list of variant-name prefixes")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)

    import jax

    d, h, kv, hd, f, v = (int(x) for x in args.dims.split(","))
    variants = build_variants(args.batch, args.slots, d, h, kv, hd, f, v, args.attn_layers)
    variants.update(build_projection_variants(args.batch, d, h, kv, hd, f, args.proj_layers))
    results = {"device": jax.devices()[0].device_kind, "jax": jax.__version__, "args": vars(args), "variants": {}}
    for name, (fn, x0, weights) in variants.items():
        if args.only and not any(name.startswith(o) for o in args.only.split(",")):
            continue
        try:
            per = {"attn/": args.attn_layers, "proj/": args.proj_layers}.get(name[:5], 1)  # time per layer
            r = time_variant(fn, x0, weights, args.iters, per)
            print(f"{name:22s} busy {r['busy_us_per_iter']:8.1f} us/iter   wall {r['wall_us_per_iter']:8.1f} us/iter"
                  f"   top {r['top_kernels_us_per_iter'][:3]}", flush=True)
        except Exception as e:  # noqa: BLE001  (a formulation the backend rejects is a result too)
            r = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            print(f"{name:22s} ERROR {r['error']}", flush=True)
        results["variants"][name] = r
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
