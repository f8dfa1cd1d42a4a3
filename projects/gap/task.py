"""TASKS "gap/train": one stage of the GAP reproduction on GridOps (spec ../shared/papers/gap.md 4.4-4.7), chosen by
config.gap.stage.

  stage "a"  the base MLLM from scratch, all trainable: 40 % "read grid" captions (m = 0), 60 % direct QA (m 0..4)
  stage "b"  from stage A's params (train.init_from = "run:<stage A workdir>"): ViT + projector (and the PCA head's
             basis / mu) frozen by optim.param_groups multiplier 0; the PCA fit of stage A's frozen e_vis of the
             auxiliary images; the capacity pass (stage A, n samples at temperature T on a fixed pool of train
             queries -> pass rates -> shared.data.difficulty); the variant switches of spec 4.5 (config.gap)

Both end with the evaluation (greedy answers on test glyphs, generate.py): eval/P (acc at m = 0), eval/R (mean over
m in {2, 3, 4} of the per-m accuracy), eval/Agg = (P + R) / 2, eval/OOD (m in {5, 6}); the norm report (spec 4.6,
norms/*); for head raw_post also the same evaluation with the EMA-rescaled head (eval/*_ema, the B0+EMA row from
the same checkpoint); for feedback models the intervention probes (spec 4.7, probe/*). Training is the shared
Trainer (progress bar, checkpoints, resume); everything after it is a deterministic function of the final params,
so a resumed run recomputes it.
"""
from __future__ import annotations

import functools
import io
import json
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from projects.gap import gridops, layout
from projects.gap.prefetch import prefetched, usable_cpus
from projects.gap.generate import MAX_NEW, _greedy, generate
from projects.gap.model import GapModel, gap_loss, gap_model_config, pca_of_images
from shared.data.difficulty import assign_by_capacity, split_summary
from shared.latent import ema_update, intervene, latent_rollout
from shared.metrics.norms import depth_spearman, layer_norm_profile, norm_ratio, subspace_fraction

STAGES = ("a", "b")
PRESETS = ("full", "tiny")
POOLS = ("mnist", "synthetic")
MODES = ("none", "slots", "feedback")
HEADS = ("none", "raw_post", "raw_pre", "linear", "pca")
LOSSES = ("mse", "cos", "none")
SWITCH = ("on", "off")
TAUS = ("off", "0", "0.25", "0.5")
GRADS = ("through", "stop")
FROZEN_GROUP = "encoder/|projector/|head/basis|head/mu"   # stage B: lr multiplier 0 (decay included)
PROBES = ("zeros", "noise", "mean", "swap", "oracle")
BATCH_KEYS = ("tokens", "targets", "loss_mask", "answer_pos", "has_latent", "image", "aux_image")


def gap_options() -> ml_collections.ConfigDict:
    """config.gap: the stage and the variant switches (spec 4.4-4.5); defaults = stage A at the spec's sizes."""
    return ml_collections.ConfigDict(dict(
        stage="a", preset="full",
        pool="mnist", pool_path="../shared/data/images/mnist_5k/mnist_5k.csv.gz", synthetic_per_digit=50,
        caption_frac=0.4,                 # stage A: share of "read" captions at m = 0
        mode="none", head="none", loss="none", lam=1.0, parser="off", tau="off", grad="through", k=9,
        capacity_pool=50000, capacity_samples=8, capacity_temperature=1.0,   # spec 4.4: 50k queries, n = 8, T = 1
        n_pca=2048, pca_explained=0.95,   # PCA fit set: aux images of this many pool queries (x 9 tokens)
        n_test=2048, n_ood=1024, eval_batch=256, eval_seed=1000, n_norm=256, probes=True,
        ema_beta=0.99, n_ema=2048,
        # train batches built ahead in this many spawned processes (prefetch.py; the stream is the same), at most
        # the CPUs this process may use at run time (a constant here: config.json stays the same on any host);
        # 0 = serial in the training process
        prefetch_workers=8))


def check_options(o) -> None:
    """ValueError naming the key and its allowed values."""
    for key, allowed in (("stage", STAGES), ("preset", PRESETS), ("pool", POOLS), ("mode", MODES), ("head", HEADS),
                         ("loss", LOSSES), ("parser", SWITCH), ("tau", TAUS), ("grad", GRADS)):
        if str(o[key]) not in allowed:
            raise ValueError(f"gap.{key}={o[key]!r}: one of {', '.join(allowed)}")
    if (o.mode == "feedback") != (o.head != "none"):
        raise ValueError(f"gap.head={o.head!r} with gap.mode={o.mode!r}: a head is needed by mode feedback and only by it")
    if o.stage == "a" and (o.mode != "none" or o.parser != "off" or o.tau != "off"):
        raise ValueError("gap.stage='a' trains direct answers: gap.mode must be none, gap.parser off, gap.tau off")
    if o.mode == "none" and o.loss != "none":
        raise ValueError(f"gap.loss={o.loss!r} with gap.mode='none': no latent to supervise (use none)")
    if int(o.k) != layout.N_IMAGE:
        raise ValueError(f"gap.k={o.k}: the fixed layout holds K = {layout.N_IMAGE} latents (one per cell)")
    for key in ("capacity_pool", "capacity_samples", "n_pca", "n_test", "n_ood", "eval_batch", "n_norm", "n_ema"):
        if int(o[key]) < 1:
            raise ValueError(f"gap.{key}={o[key]}: must be >= 1")
    if int(o.get("prefetch_workers", 0)) < 0:
        raise ValueError(f"gap.prefetch_workers={o.prefetch_workers}: must be >= 0 (0 = batches built serially)")


# ------------------------------------------------------------------------------------------------ data


def model_cfg(o, frozen_vision: bool, head: str = "none"):
    return gap_model_config(o.preset, k=int(o.k), frozen_vision=frozen_vision, latent_head=head)


def response_format(o, has_latent: bool) -> str:
    """gridops.encode's variant of a stage-B row: the latent span (with the parser text when gap.parser is on) for
    rows the capacity pass assigns; the others answer directly. Mode none + parser on is T1's text imagination."""
    if not has_latent:
        return "direct"
    if o.mode == "none":
        return "text" if o.parser == "on" else "direct"
    return "latent_parser" if o.parser == "on" else "latent"


def stack_rows(examples, variants, k: int, aux: bool = True) -> dict:
    """gridops.make_batch with a variant per row; aux False leaves out aux_image (not rendered)."""
    rows = [gridops.encode(e, v, k) for e, v in zip(examples, variants)]
    batch = {key: np.stack([r[key] for r in rows]) for key in rows[0]}
    batch["image"] = np.stack([e.image() for e in examples])
    if aux:
        batch["aux_image"] = np.stack([e.aux_image() for e in examples])
    batch["m"] = np.array([e.m for e in examples], np.int32)
    return batch


def needs_aux(o) -> bool:
    """Whether training reads batch["aux_image"]: gap_loss embeds it only as the latent loss's targets v*, so only
    with a latent mode and a latent loss (never in stage A, nor in T0 / T1 / S0). When not, the train batches
    leave the key out (the Trainer's step takes whatever keys the batch has) and skip its render."""
    return o.mode != "none" and o.loss != "none"


class StageAData:
    """Step s's batch = train examples s*B .. s*B+B-1 (a function of seed and step only, so resuming at step s
    gives the same stream); each is a caption (kind read, m = 0) with probability caption_frac, else a cell /
    rowsum question with m in 0..4. batch_at(step) is that pure function; the object holds plain values and the
    glyph pools only, so it pickles (prefetch.py sends it to its worker processes once)."""

    def __init__(self, o, pools, seed: int, batch_size: int):
        self.caption_frac, self.k, self.aux = float(o.caption_frac), int(o.k), needs_aux(o)
        self.pools, self.seed, self.batch = pools, int(seed), int(batch_size)
        self.step = 0

    def example(self, i: int):
        caption = np.random.default_rng([self.seed, 77, i]).random() < self.caption_frac
        if caption:
            return gridops.make_example(self.pools, "train", i, self.seed, m_range=(0, 0), kinds=("read",))
        return gridops.make_example(self.pools, "train", i, self.seed)

    def rows(self, examples, variants) -> dict:
        batch = stack_rows(examples, variants, self.k, aux=self.aux)
        return {key: batch[key] for key in BATCH_KEYS if key in batch}

    def batch_at(self, step: int) -> dict:
        start = int(step) * self.batch
        examples = [self.example(i) for i in range(start, start + self.batch)]
        return self.rows(examples, ["direct"] * len(examples))

    def __iter__(self):
        return self

    def __next__(self):
        batch = self.batch_at(self.step)
        self.step += 1
        return batch

    def get_state(self):
        return {"step": self.step}

    def set_state(self, state):
        self.step = int(state["step"])

    def close(self):
        """Nothing to release (prefetch.Prefetched, the other train iterator, stops its workers here)."""


class StageBData(StageAData):
    """Epochs over the fixed pool of capacity_pool train queries (cell / rowsum, m 0..4), shuffled per epoch;
    row i's format is response_format(assigned[i])."""

    def __init__(self, o, pools, seed: int, batch_size: int, assigned: np.ndarray):
        super().__init__(o, pools, seed, batch_size)
        self.assigned = np.asarray(assigned, bool)
        self.formats = (response_format(o, False), response_format(o, True))   # plain strings (picklable)

    def _order(self, epoch: int) -> np.ndarray:
        if getattr(self, "_epoch", None) != epoch:    # one permutation per epoch (50k: too slow to redo per row)
            self._epoch, self._perm = epoch, np.random.default_rng([self.seed, 99, epoch]).permutation(
                len(self.assigned))
        return self._perm

    def indices(self, step: int) -> list[int]:
        """The pool rows of step `step`'s batch."""
        n = len(self.assigned)
        return [int(self._order(j // n)[j % n]) for j in range(step * self.batch, (step + 1) * self.batch)]

    def batch_at(self, step: int) -> dict:
        idx = self.indices(int(step))
        examples = [gridops.make_example(self.pools, "train", i, self.seed) for i in idx]
        return self.rows(examples, [self.formats[int(self.assigned[i])] for i in idx])


def train_data(data, o):
    """The train iterator over `data` (StageAData / StageBData): batches built ahead in gap.prefetch_workers
    spawned processes (at most the CPUs this process may use), or `data` itself when that is 0."""
    return prefetched(data, min(int(o.get("prefetch_workers", 0)), usable_cpus()))


def pools_of(o):
    if o.pool == "synthetic":
        return gridops.synthetic_pools(0, int(o.synthetic_per_digit))
    return gridops.load_pools(o.pool_path)


# ------------------------------------------------------------------------------------------------ capacity


@functools.partial(nnx.jit, static_argnames=("n",))
def _sample_two(model, tokens, image, key, temperature, *, n: int):
    """n samples at `temperature` of the first two answer tokens after the prompt: ([B,n], [B,n])."""
    toks, embeds, mask, _ = model._image_inputs({"tokens": tokens, "image": image})
    b = toks.shape[0]
    k1, k2 = jax.random.split(key)
    first = model.decoder(toks, embeds=embeds, embed_mask=mask)["logits"][:, -1].astype(jnp.float32)
    t1 = jax.random.categorical(k1, first[:, None] / temperature, shape=(b, n)).astype(toks.dtype)
    rep = lambda x: jnp.repeat(x, n, axis=0)
    toks2 = jnp.concatenate([rep(toks), t1.reshape(-1, 1)], axis=1)
    embeds2 = jnp.concatenate([rep(embeds), jnp.zeros_like(rep(embeds)[:, :1])], axis=1)
    mask2 = jnp.concatenate([rep(mask), jnp.zeros((b * n, 1), bool)], axis=1)
    second = model.decoder(toks2, embeds=embeds2, embed_mask=mask2)["logits"][:, -1].astype(jnp.float32)
    t2 = jax.random.categorical(k2, second / temperature).astype(toks.dtype)
    return t1, t2.reshape(b, n)


def capacity_correct(model, examples, *, n: int, temperature: float, seed: int, batch: int) -> np.ndarray:
    """[Q, n] bool: sample j of the base model's direct answer to query q is right. A cell answer is right when
    its two sampled tokens are the digit and <eos>; a rowsum answer when they are its two digits (the <eos> after
    them is not sampled: a third token would double the cost for a format stage A never gets wrong)."""
    out = []
    for s, (chunk, real) in enumerate(_chunks(examples, batch)):
        rows = stack_rows(chunk, ["direct"] * len(chunk), layout.N_IMAGE)
        t1, t2 = _sample_two(model, jnp.asarray(rows["tokens"][:, :layout.PROMPT_LEN]), jnp.asarray(rows["image"]),
                             jax.random.key(seed * 1_000_003 + s), jnp.float32(temperature), n=n)
        t1, t2 = np.asarray(t1), np.asarray(t2)
        for i, e in enumerate(chunk[:real]):
            want = gridops.ids(e.answer) + [layout.EOS]
            out.append((t1[i] == want[0]) & (t2[i] == want[1]))
    return np.stack(out)


# ------------------------------------------------------------------------------------------------ evaluation


_generate = nnx.jit(generate, static_argnames=("mode", "k", "max_new", "auto_latent"))


def eval_examples(o, pools):
    """(test examples, ood examples): cell / rowsum questions on test glyphs, the same for every run (eval_seed)."""
    seed = int(o.eval_seed)
    return (gridops.make_examples(pools, "test", int(o.n_test), seed),
            gridops.make_examples(pools, "ood", int(o.n_ood), seed))


def _chunks(examples, size: int):
    """(chunk, n real rows): the last chunk padded with copies of its last example to `size`, so every jitted
    call sees one batch shape (one compile per program)."""
    for s in range(0, len(examples), size):
        chunk = list(examples[s:s + size])
        n = len(chunk)
        yield chunk + [chunk[-1]] * (size - n), n


def greedy_correct(model, examples, *, mode: str, k: int, batch: int, auto_latent: str = "feedback"):
    """(per-example correct [N] bool, opened [N] bool: the first greedy token after the prompt is <latent>) of
    greedy answers (generate.py). mode "auto" is generate's own rule written out here (rows that open the span
    take the latent path), so the direct pass that decides it is run once and gives `opened` too."""
    correct, opened = [], []
    for chunk, n in _chunks(examples, batch):
        rows = stack_rows(chunk, ["direct"] * len(chunk), k)
        inputs = {"tokens": jnp.asarray(rows["tokens"]), "image": jnp.asarray(rows["image"])}
        if mode in ("none", "auto"):
            direct = np.asarray(_generate(model, inputs, mode="none", k=k))
            opens = direct[:, 0] == layout.ID["<latent>"]
            tokens = direct
            if mode == "auto":
                latent = np.asarray(_generate(model, inputs, mode=auto_latent, k=k))
                tokens = np.where(opens[:, None], latent, direct)
        else:
            tokens = np.asarray(_generate(model, inputs, mode=mode, k=k))
            opens = np.ones(len(chunk), bool)   # the span is forced open
        correct += [gridops.decode_answer(t) == e.answer for t, e in zip(tokens[:n], chunk[:n])]
        opened += list(opens[:n])
    return np.array(correct, bool), np.array(opened, bool)


def pr_metrics(correct, ms, prefix: str = "eval/", suffix: str = "") -> dict:
    """P = acc at m = 0; R = mean over m in {2,3,4} of the per-m accuracy; Agg = (P + R) / 2 (in %)."""
    ms = np.asarray(ms)
    acc = lambda sel: float(100 * correct[sel].mean()) if sel.any() else float("nan")
    p = acc(ms == 0)
    r = float(np.nanmean([acc(ms == m) for m in (2, 3, 4)]))
    out = {f"{prefix}P{suffix}": p, f"{prefix}R{suffix}": r, f"{prefix}Agg{suffix}": (p + r) / 2}
    for m in range(5):
        out[f"{prefix}acc_m{m}{suffix}"] = acc(ms == m)
    return out


def evaluate(model, o, test, ood, *, mode: str, auto_latent: str = "feedback", suffix: str = "") -> dict:
    k, batch = int(o.k), int(o.eval_batch)
    correct, opened = greedy_correct(model, test, mode=mode, k=k, batch=batch, auto_latent=auto_latent)
    out = pr_metrics(correct, [e.m for e in test], suffix=suffix)
    ood_correct, _ = greedy_correct(model, ood, mode=mode, k=k, batch=batch, auto_latent=auto_latent)
    out[f"eval/OOD{suffix}"] = float(100 * ood_correct.mean())
    out[f"eval/opened{suffix}"] = float(100 * opened.mean())
    return out


@functools.partial(nnx.jit, static_argnames=("mode", "k"))
def _norm_forward(model, batch, *, mode: str, k: int):
    out, zs, e_vis = model.forward(batch, mode=mode, k=k, grad=False, hidden="prefinal", return_evis=True)
    layers = model.forward(batch, mode=mode, k=k, grad=False, hidden="layers")[0]["layer_hidden"]
    return out["hidden"], out["prefinal"], layers, zs, e_vis


def norm_report(model, o, examples, *, mode: str, fit=None) -> dict:
    """Spec 4.6 on rows in the trained format: r_text / r_vis of the post-norm N_f(h_L) and the pre-norm h_L over
    ||E[tok]|| (text) and ||e_vis|| (image); depth Spearman of the per-layer medians (text, image); for latent
    models the fed latents' ratio to ||e_vis|| and their subspace fraction rho in stage A's e_vis PCA subspace."""
    k = int(o.k)
    has = mode != "none"
    variant = response_format(o, True)     # the trained format of a latent row (T1: the parser as text)
    rows = stack_rows(examples, [variant] * len(examples), k)
    post, pre, layers, zs, e_vis = _norm_forward(model, {key: jnp.asarray(rows[key]) for key in BATCH_KEYS},
                                                 mode=mode, k=k)
    post, pre, layers, e_vis = (np.asarray(x, np.float64) for x in (post, pre, layers, e_vis))
    tokens = rows["tokens"]
    image = np.zeros(tokens.shape, bool)
    image[:, list(layout.IMAGE_POS)] = True
    latent = np.zeros(tokens.shape, bool)
    if has:
        latent[:, list(layout.latent_pos(k))] = True
    text = (tokens != layout.PAD) & ~image & ~latent
    table = np.asarray(model.decoder.embed[...], np.float64)
    e_vis_rows = e_vis.reshape(-1, e_vis.shape[-1])
    out = {"norms/r_text_post": norm_ratio(post[text], table[tokens[text]]),
           "norms/r_vis_post": norm_ratio(post[image], e_vis_rows),
           "norms/r_text_pre": norm_ratio(pre[text], table[tokens[text]]),
           "norms/r_vis_pre": norm_ratio(pre[image], e_vis_rows),
           "norms/evis_median": float(np.median(np.linalg.norm(e_vis_rows, axis=-1))),
           "norms/text_embed_median": float(np.median(np.linalg.norm(table[tokens[text]], axis=-1)))}
    modality = np.where(image, 1, np.where(latent, 2, 0))
    profile = layer_norm_profile(layers, modality, text | image | latent, {"text": 0, "image": 1, "latent": 2})
    out["norms/spearman_text"] = depth_spearman(profile["text"])
    out["norms/spearman_image"] = depth_spearman(profile["image"])
    for name in ("text", "image"):
        out[f"norms/h_last_{name}"] = float(profile[name][-1])
    if zs is not None:
        u = np.asarray(zs, np.float64).reshape(-1, zs.shape[-1])
        out["norms/r_fed"] = norm_ratio(u, e_vis_rows)
        if fit is not None:
            out["norms/rho"] = float(np.mean(subspace_fraction(u, fit.mu, fit.basis)))
    return out


@functools.partial(nnx.jit, static_argnames=("k", "max_new"))
def _decode_given(model, tokens, image, zs, *, k: int, max_new: int):
    """Greedy tokens after prompt + <latent> + zs [B,K,D] as the span's inputs + </latent> (the probes' path)."""
    toks, embeds, mask, _ = model._image_inputs({"tokens": tokens, "image": image})
    b, p = toks.shape
    span = jnp.concatenate([toks, jnp.full((b, 1), layout.ID["<latent>"], toks.dtype),
                            jnp.full((b, k), layout.LATSLOT, toks.dtype),
                            jnp.full((b, 1), layout.ID["</latent>"], toks.dtype)], axis=1)
    zero = jnp.zeros((b, 1, embeds.shape[-1]), embeds.dtype)
    span_embeds = jnp.concatenate([embeds, zero, zs.astype(embeds.dtype), zero], axis=1)
    span_mask = jnp.concatenate([mask, jnp.zeros((b, 1), bool), jnp.ones((b, k), bool), jnp.zeros((b, 1), bool)], 1)
    from shared.model import init_cache
    cache = init_cache(model.decoder.cfg, b, p + k + 2 + max_new)
    out = model.decoder(span, embeds=span_embeds, embed_mask=span_mask, cache=cache, cache_index=jnp.int32(0))
    return _greedy(model.decoder, out["cache"], p + k + 2, out["logits"][:, -1], max_new)


@functools.partial(nnx.jit, static_argnames=("k",))
def _rollout(model, tokens, image, *, k: int):
    """The K generated latents (grad off) and v* = frozen e_vis of the aux image."""
    toks, embeds, mask, _ = model._image_inputs({"tokens": tokens, "image": image})
    b = toks.shape[0]
    opened = jnp.concatenate([toks, jnp.full((b, 1), layout.ID["<latent>"], toks.dtype)], axis=1)
    embeds = jnp.concatenate([embeds, jnp.zeros_like(embeds[:, :1])], axis=1)
    mask = jnp.concatenate([mask, jnp.zeros((b, 1), bool)], axis=1)
    return latent_rollout(model.decoder, model.head, opened, k, embeds=embeds, embed_mask=mask, grad=False)["zs"]


def answer_on(example, moved) -> str:
    """example's question asked of another moved grid (the swap probe's donor answer)."""
    if example.kind == "cell":
        return str(int(moved[example.args[0], example.args[1]]))
    s = int(moved[example.args[0]].sum())
    return f"{s // 10} {s % 10}"


def probes(model, o, examples, fit, evis_norm: float) -> dict:
    """Spec 4.7 on the R rows (m in {2,3,4}), every row through the latent path: R with the generated latents and
    with each placeholder (zeros, norm-matched noise, mu repeated, swap = the previous row's latents, oracle v*);
    for swap also the donor agreement (% of answers equal to the donor grid's answer, over rows where that differs
    from the row's own answer)."""
    k, size = int(o.k), int(o.eval_batch)
    rows_r = [e for e in examples if e.m in (2, 3, 4)]
    results = {kind: [] for kind in ("generated",) + PROBES}
    donor_agree = []
    for s, (chunk, n) in enumerate(_chunks(rows_r, size)):
        rows = stack_rows(chunk, ["direct"] * len(chunk), k)
        tokens = jnp.asarray(rows["tokens"][:, :layout.PROMPT_LEN])
        image = jnp.asarray(rows["image"])
        zs = _rollout(model, tokens, image, k=k)
        v_star = model.embed_images(jnp.asarray(rows["aux_image"]), frozen=True)
        for kind in results:
            given = zs if kind == "generated" else intervene(
                kind, zs, key=jax.random.key(s), norm=evis_norm, mu=jnp.asarray(fit.mu, zs.dtype), targets=v_star)
            out = np.asarray(_decode_given(model, tokens, image, given, k=k, max_new=MAX_NEW))
            answers = [gridops.decode_answer(t) for t in out[:n]]
            results[kind] += [a == e.answer for a, e in zip(answers, chunk)]
            if kind == "swap":
                donors = np.roll(np.arange(len(chunk)), 1)   # intervene('swap') rolls the batch by one
                for a, e, d in zip(answers, chunk[:n], donors):
                    want = answer_on(e, chunk[d].moved)
                    if want != e.answer:
                        donor_agree.append(a == want)
    ms = [e.m for e in rows_r]
    out = {}
    for kind, correct in results.items():
        out[f"probe/R_{kind}"] = pr_metrics(np.array(correct), ms, prefix="")["R"]
    out["probe/swap_donor_agree"] = float(100 * np.mean(donor_agree)) if donor_agree else float("nan")
    return out


# ------------------------------------------------------------------------------------------------ the stages


def loss_fn_for(o):
    mode = str(o.mode)
    latent_loss = str(o.loss) if mode != "none" else "none"

    def loss_fn(graphdef, params, batch, rng):
        del rng
        model = nnx.merge(graphdef, params)
        return gap_loss(model, batch, mode=mode, k=int(o.k), lam=float(o.lam), latent_loss=latent_loss,
                        grad=o.grad == "through")
    return loss_fn


def load_stage_a(path: str):
    """(stage A's config, its params) from its workdir's config.json and latest checkpoint."""
    from shared import fs
    from shared.train import Trainer

    path = path[len("run:"):] if path.startswith("run:") else path
    if not fs.exists(fs.join(path, "config.json")):
        raise FileNotFoundError(f"gap stage b: train.init_from=run:{path} has no config.json (run stage A first)")
    other = ml_collections.ConfigDict(json.loads(fs.read_text(fs.join(path, "config.json"))))
    if other.get("task") != "gap/train" or other.gap.stage != "a":
        raise ValueError(f"gap stage b: train.init_from={path} is not a gap stage-A run")
    oa = other.gap
    source = Trainer(other, path, loading="warm start from", loss_fn=loss_fn_for(oa),
                     build_model_fn=lambda c, seed: GapModel(model_cfg(oa, False), rngs=nnx.Rngs(params=seed)))
    try:
        if source.restored_step is None:
            raise FileNotFoundError(f"gap stage b: the stage-A run {path} has no checkpoint")
        return other, jax.device_get(source.params), source.graphdef
    finally:
        source.close()


def build_stage(config, workdir: str):
    """(Trainer, train iterator, PCA fit or None, extra summary metrics) of config.gap.stage, ready to fit. Stage
    B loads stage A (train.init_from=run:<workdir>), fits the PCA of its frozen e_vis of the pool's aux images,
    runs the capacity pass when gap.tau is a number, and warm-starts every leaf stage A has (the head is new)."""
    from shared.train import Trainer

    o = config.gap
    check_options(o)
    pools = pools_of(o)
    seed = int(config.seed)
    if o.stage == "a":
        build = lambda c, s: GapModel(model_cfg(o, False), rngs=nnx.Rngs(params=s))
        train_iter = train_data(StageAData(o, pools, seed, int(config.train.batch_size)), o)
        return Trainer(config, workdir, loss_fn=loss_fn_for(o), build_model_fn=build), train_iter, None, {}
    if not config.train.init_from:
        raise ValueError("gap.stage='b' needs train.init_from=run:<stage A workdir>")
    if config.optim.param_groups.get(FROZEN_GROUP) != 0.0:
        raise ValueError(f"gap.stage='b': optim.param_groups must hold {{{FROZEN_GROUP!r}: 0.0}} (frozen ViT, "
                         "projector, PCA basis / mu)")
    _, params_a, graph_a = load_stage_a(str(config.train.init_from))
    model_a = nnx.merge(graph_a, params_a)
    pool_examples = gridops.make_examples(pools, "train", int(o.capacity_pool), seed)
    aux = np.stack([e.aux_image() for e in pool_examples[:int(o.n_pca)]])
    fit = pca_of_images(model_a, aux, explained=float(o.pca_explained))
    extra = {"pca/k": float(fit.k), **stage_a_metrics(str(config.train.init_from))}
    if o.tau == "off":
        assigned = np.ones(len(pool_examples), bool)
    else:
        assigned = capacity_assignment(model_a, o, pool_examples, seed, workdir, extra)
    head = str(o.head)
    build = lambda c, s: GapModel(model_cfg(o, True, head), rngs=nnx.Rngs(params=s),
                                  fit=fit if head == "pca" else None)

    def init_params(abstract):
        return {key: jax.tree.map(lambda x, a: jax.device_put(x, a.sharding), params_a[key], abstract[key])
                for key in params_a}

    train_iter = train_data(StageBData(o, pools, seed, int(config.train.batch_size), assigned), o)
    trainer = Trainer(config, workdir, loss_fn=loss_fn_for(o), build_model_fn=build, init_params=init_params)
    return trainer, train_iter, fit, extra


def stage_a_metrics(init_from: str) -> dict:
    """Stage A's evaluation, norm report and init norms as stageA/<key> (sweep tables list points, not stages, and
    claim N is about stage A): read from its summary.json, {} when it has none."""
    from shared import fs

    path = fs.join(init_from[len("run:"):] if init_from.startswith("run:") else init_from, "summary.json")
    if not fs.exists(path):
        return {}
    summary = json.loads(fs.read_text(path))
    return {f"stageA/{key}": value for key, value in summary.items() if key.startswith(("eval/", "norms/", "init/"))}


def run(config, workdir: str) -> dict:
    from shared.train import write_summary

    started = time.time()
    o = config.gap
    trainer, train_iter, fit, extra = build_stage(config, workdir)
    if o.stage == "a":
        extra.update(init_norms(trainer, o, pools_of(o), workdir))
    try:
        summary = trainer.fit(train_iter)
    finally:
        train_iter.close()   # stops the prefetch workers
    trainer.close()
    model = trainer.model()
    print(f"[gap] stage {o.stage}: trained {summary['steps']} steps; evaluating", flush=True)
    summary.update(extra)
    summary.update(final_metrics(model, o, pools_of(o), fit, int(config.seed)))
    summary["wall_time_s_total"] = time.time() - started
    write_summary(workdir, summary)
    return summary


def init_norms(trainer, o, pools, workdir: str) -> dict:
    """Spec 4.6 "at init": the norm report of the fresh stage-A model as init/* keys, measured before the first
    step and kept in <workdir>/norms_init.json (a resumed run reads it back; one resumed without it has none)."""
    from shared import fs   # a workdir may be remote (gs://), as any run's

    path = fs.join(workdir, "norms_init.json")
    if trainer.start_step == 0 and not fs.exists(path):
        rows = gridops.make_examples(pools, "test", int(o.n_norm), int(o.eval_seed))   # = the eval's first rows
        report = norm_report(trainer.model(), o, rows, mode="none")
        fs.write_text(path, json.dumps({key.replace("norms/", "init/"): value for key, value in report.items()}))
    if not fs.exists(path):
        return {}
    return json.loads(fs.read_text(path))


def capacity_assignment(model_a, o, pool_examples, seed: int, workdir: str, extra: dict) -> np.ndarray:
    """Pass rates of stage A on the pool (cached in <workdir>/capacity.npz so a resumed run reuses them) -> the
    rows that get the latent format (rate <= tau)."""
    from shared import fs   # a workdir may be remote (gs://), as any run's

    path = fs.join(workdir, "capacity.npz")
    if fs.exists(path):
        correct = np.load(io.BytesIO(fs.read_bytes(path)))["correct"]
    else:
        t0 = time.time()
        correct = capacity_correct(model_a, pool_examples, n=int(o.capacity_samples),
                                   temperature=float(o.capacity_temperature), seed=seed, batch=int(o.eval_batch))
        buffer = io.BytesIO()
        np.savez(buffer, correct=correct)
        fs.write_bytes(path, buffer.getvalue())
        print(f"[gap] capacity pass: {len(correct)} queries x {correct.shape[1]} samples in {time.time() - t0:.0f}s",
              flush=True)
    tau = float(o.tau)
    stats = split_summary(correct, tau)
    extra.update({"capacity/frac_latent": stats["frac_assigned"], "capacity/mean_rate": stats["mean_rate"]})
    return assign_by_capacity(correct, tau)


def final_metrics(model, o, pools, fit, seed: int) -> dict:
    test, ood = eval_examples(o, pools)
    mode = str(o.mode)
    gen_mode = mode if (mode == "none" or o.tau == "off") else "auto"
    t0 = time.time()
    out = evaluate(model, o, test, ood, mode=gen_mode, auto_latent=mode if mode != "none" else "feedback")
    print(f"[gap] eval ({gen_mode}): P {out['eval/P']:.1f} R {out['eval/R']:.1f} Agg {out['eval/Agg']:.1f} "
          f"OOD {out['eval/OOD']:.1f} ({time.time() - t0:.0f}s)", flush=True)
    out.update(norm_report(model, o, test[:int(o.n_norm)], mode=mode, fit=fit))
    if mode == "feedback":
        train = gridops.make_examples(pools, "train", int(o.n_ema), seed)
        evis_norm = ema_norm_of(model, train, float(o.ema_beta), int(o.eval_batch))
        out["norms/ema_m"] = evis_norm
        if o.probes:
            out.update(probes(model, o, test, fit, evis_norm))
        if o.head == "raw_post":   # the B0+EMA row: the same checkpoint, its fed latents rescaled to m
            model.set_head("ema", ema_norm=evis_norm)
            out.update(evaluate(model, o, test, ood, mode=gen_mode, auto_latent="feedback", suffix="_ema"))
            model.set_head("raw_post")
    return out


def ema_norm_of(model, examples, beta: float, batch: int) -> float:
    """m of spec 1.2: the EMA (beta) of the batch-mean ||e_vis|| over training images, started at the first batch."""
    m = None
    for s in range(0, len(examples), batch):
        images = np.stack([e.image() for e in examples[s:s + batch]])
        mean = float(np.mean(np.linalg.norm(np.asarray(model.embed_images(jnp.asarray(images)), np.float64), axis=-1)))
        m = mean if m is None else float(ema_update(m, mean, beta))
    return m
