"""The project's tasks: fine-tuning accuracy over seeds, and the variance measurement, both from a shared theta0.

TASKS "mdm_variance/finetune"  (accuracy table, spec section 7.2)
  stage A  theta0: the same network pre-trained on the task distribution (MDM: every token maskable; ARM:
           next-token loss on the whole row), once per (task, kind, settings) in config.mdm_variance.theta0.dir
           (default <workdir>/../_theta0/<hash>, shared by a sweep's points under a file lock).
  stage B  for each of mdm_variance.seeds seeds: SFT from theta0 with the method (prompt never masked), through
           the shared Trainer in <workdir>/seed_<s>; then greedy decoding of mdm_variance.eval_examples held-out
           problems (LLaDA decoding for MDMs, left-to-right for the ARM) and the held-out ELBO (MDM) or NLL (ARM).
  summary  acc/mean, acc/std, acc/min, acc/max, acc/median, acc/seeds, acc/theta0, elbo/mean, ...
TASKS "mdm_variance/variance"  (variance table, spec section 6) at theta0 for one method: A, B, C, total (and
  their sum), rho(t) of paired masks, n Var(batch mean), the EMA-adjusted one, gradient-noise tr Cov; P-POTS
  points also carry the predicted variances of the estimation pass.
TASKS "mdm_variance/theta0"  stage A as a sweep stage: theta0 of config.mdm_variance.method's kind trained in the
  workdir itself (checkpoints every theta0.checkpoint_every steps, so a stopped stage resumes), its params in
  <workdir>/theta0_params.npz and its greedy accuracy on eval_examples held-out problems in summary.json
  (acc/theta0). Points name it with mdm_variance.theta0.run = "{stage:NAME}" and then never train theta0 themselves.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from shared import sharding as sh
from shared.config import write_config
from shared.diffusion import masked_losses, mdm_inputs, mdm_loss_fn, model_logits_fn
from shared.diffusion.loss import diffusion_options
from shared.diffusion.task import (checked_accuracy, decode_texts, evaluate_batches, heldout_elbo, mask_id_for,
                                   mdm_loss_factory)
from shared.registry import TASKS
from shared.train.step import lm_loss_fn
from shared.train.trainer import Trainer, write_summary
from projects.mdm_variance import variance as V
from projects.mdm_variance.methods import build_samplers, method_spec
from projects.mdm_variance.ppots import PPOTSSampler


# ------------------------------------------------------------------------------------------ helpers


def derived(config, changes: dict) -> ml_collections.ConfigDict:
    """An unlocked copy of config with dotted keys changed."""
    out = ml_collections.ConfigDict(config.to_dict())
    for key, value in changes.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return out


def kind_of(config) -> str:
    return method_spec(config.mdm_variance.method).get("kind", "mdm")


def use_compile_cache(config, workdir: str) -> None:
    spec = config.mdm_variance.compile_cache
    if not spec:
        return
    path = os.path.join(os.path.dirname(os.path.abspath(workdir)), "_jax_cache") if spec == "auto" else spec
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def load_examples(config, split: str, n: int, data_seed: int | None = None) -> list[dict]:
    from shared.data.examples import load_task

    options = dict(config.data.task_options.to_dict())
    if data_seed is not None:
        options["data_seed"] = data_seed
    return load_task(config.data.source, split, n, 0, **options)


def make_rows(tokenizer, examples, seq_len: int, where: str) -> dict[str, np.ndarray]:
    from shared.train.sft import build_rows

    rows, stats = build_rows(tokenizer, examples, seq_len)
    if stats["dropped"] or stats["truncated"]:
        raise ValueError(f"{where}: data.seq_len={seq_len} is too short for the task's fixed-width examples "
                         f"({stats})")
    return rows


def tokenizer_of(config, workdir: str):
    from shared.data import build_tokenizer

    return build_tokenizer(config.data, workdir, config.model.vocab_size)


def batches_of(rows: dict, batch_size: int) -> list[dict]:
    n = len(rows["inputs"]) // batch_size * batch_size
    return [{k: v[s:s + batch_size] for k, v in rows.items()} for s in range(0, n, batch_size)]


@contextlib.contextmanager
def file_lock(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------ stage A: theta0


def theta0_dir(config, workdir: str, kind: str) -> str:
    opts = config.mdm_variance.theta0
    if opts.dir:
        return os.path.join(opts.dir, f"{config.data.source.split('/')[-1]}_{kind}")
    settings = {k: v for k, v in opts.to_dict().items() if k not in ("run", "checkpoint_every")}  # not the math
    key = json.dumps({"model": config.model.to_dict(), "data": config.data.to_dict(), "theta0": settings,
                      "diffusion": config.diffusion.to_dict(), "kind": kind}, sort_keys=True, default=str)
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    name = config.data.source.split("/")[-1]
    return os.path.join(os.path.dirname(os.path.abspath(workdir)), "_theta0", f"{name}_{kind}_{digest}")


def theta0_config(config, kind: str) -> ml_collections.ConfigDict:
    """The config stage A trains theta0 with (mdm_variance.theta0's seed, steps, batch and schedule; MDM: every
    token maskable; ARM: the next-token loss on the whole row)."""
    opts = config.mdm_variance.theta0
    return derived(config, {"seed": int(opts.seed), "model.causal": kind == "arm",
                            "train.steps": int(opts.steps), "train.batch_size": int(opts.batch_size),
                            "train.eval_batches": 0,
                            "train.checkpoint_every": int(opts.get("checkpoint_every", 0)) or int(opts.steps),
                            "train.loss": "lm_xent", "optim.lr": float(opts.lr),
                            "optim.warmup_steps": int(opts.warmup_steps), "optim.schedule": "cosine",
                            "diffusion.stage": "pretrain"})


def train_theta0(config, directory: str, kind: str, evaluate: bool = False) -> dict:
    """Trains (or resumes) theta0 in `directory`, saves its leaves to THETA0_FILE and writes summary.json; with
    `evaluate`, the summary also holds theta0's greedy accuracy on mdm_variance.eval_examples test problems."""
    opts = config.mdm_variance.theta0
    cfg = theta0_config(config, kind)
    os.makedirs(directory, exist_ok=True)
    write_config(cfg, directory)
    tokenizer = tokenizer_of(cfg, directory)
    examples = load_examples(cfg, "train", int(opts.n_examples), int(opts.data_seed))
    rows = make_rows(tokenizer, examples, int(cfg.data.seq_len), "mdm_variance theta0")
    from shared.train.sft import SFTBatchIterator

    train_iter = SFTBatchIterator(rows, int(opts.batch_size), seed=int(opts.seed))
    factory, mask_id = None, None
    if kind == "mdm":
        mask_id = mask_id_for(cfg, tokenizer)
        factory = mdm_loss_factory(cfg, mask_id=mask_id, eos_id=tokenizer.eos_id)
    trainer = Trainer(cfg, directory, loss_fn_factory=factory)
    print(f"[mdm_variance] theta0 ({kind}) -> {directory}: {opts.steps} steps", flush=True)
    summary = trainer.fit(train_iter, [])
    if jax.process_index() == 0:
        leaves = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(trainer.params))]
        np.savez(os.path.join(directory, THETA0_FILE), *leaves)
    summary["kind"] = kind
    if evaluate and not summary["diverged"]:
        test = load_examples(cfg, "test", int(config.mdm_variance.eval_examples))
        summary["acc/theta0"] = greedy_accuracy(trainer, tokenizer, test, kind=kind,
                                                config=finetune_base(config, kind), mask_id=mask_id)
        print(f"[mdm_variance] theta0 ({kind}) greedy accuracy {summary['acc/theta0']:.3f}", flush=True)
    write_summary(directory, summary)
    trainer.close()
    return summary


def ensure_theta0(config, workdir: str, kind: str) -> str:
    """The folder holding theta0: mdm_variance.theta0.run (a finished "mdm_variance/theta0" stage of this kind),
    else trains theta0 unless its folder already holds a summary."""
    run = config.mdm_variance.theta0.get("run", "")
    if run:
        path = os.path.join(run, "summary.json")
        if not os.path.exists(path) or not os.path.exists(os.path.join(run, THETA0_FILE)):
            raise FileNotFoundError(f"mdm_variance.theta0.run={run!r}: no finished theta0 stage there "
                                    f"({THETA0_FILE} and summary.json)")
        with open(path) as f:
            stage_kind = json.load(f).get("kind", kind)
        if stage_kind != kind:
            raise ValueError(f"mdm_variance.theta0.run={run!r} holds a {stage_kind} theta0; this point needs {kind}")
        return run
    directory = theta0_dir(config, workdir, kind)
    # Beside the workdir, not in it: sibling points of a table (same model, data and theta0 settings) share one
    # theta0. Said on every launch, since it is the one thing this task writes outside --workdir.
    with file_lock(directory + ".lock"):
        if not os.path.exists(os.path.join(directory, "summary.json")):
            print(f"[mdm_variance] training theta0 into {directory} (shared by runs beside {workdir}; "
                  f"--config.mdm_variance.theta0.dir or .run to place it)", flush=True)
            train_theta0(config, directory, kind)
        else:
            print(f"[mdm_variance] theta0 from {directory}", flush=True)
        return directory


@TASKS.register("mdm_variance/theta0")
def theta0_stage(config, workdir: str) -> dict:
    """Stage A in the workdir itself (module doc); a finished stage is not re-run."""
    path = os.path.join(workdir, "summary.json")
    if os.path.exists(path) and os.path.exists(os.path.join(workdir, THETA0_FILE)):
        with open(path) as f:
            return json.load(f)
    use_compile_cache(config, workdir)
    return train_theta0(config, workdir, kind_of(config), evaluate=True)


THETA0_FILE = "theta0_params.npz"


def theta0_params(directory: str):
    """theta0's parameter leaves (host arrays, in jax.tree.leaves order), for `placed`."""
    with np.load(os.path.join(directory, THETA0_FILE)) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


def placed(leaves):
    """Trainer(init_params=...) from theta0's leaves: each placed like the abstract parameter it replaces."""

    def init(abstract):
        flat, treedef = jax.tree.flatten(abstract)
        if len(flat) != len(leaves) or any(a.shape != x.shape for a, x in zip(flat, leaves)):
            raise ValueError("theta0 parameters do not fit this model: model.* must equal theta0's")
        return jax.tree.unflatten(treedef, [jax.device_put(x.astype(a.dtype), a.sharding)
                                            for x, a in zip(leaves, flat)])

    return init


# ------------------------------------------------------------------------------------------ evaluation


def greedy_accuracy(trainer, tokenizer, examples, *, kind: str, config, mask_id: int | None,
                    batch_size: int = 256) -> float:
    """Exact-match accuracy of greedy decoding on fixed-width examples (LLaDA decoding or left-to-right): the
    prompts need no padding, and the decoding block divides the answer region."""
    from shared.data.examples import checker

    check = checker(config.data.source)
    opts = diffusion_options(config)
    gen = len(tokenizer.encode(examples[0]["completion"])) + 1  # completion + eos
    block = min(int(opts.decode_block), gen)
    while gen % block:
        block -= 1
    fill = mask_id if kind == "mdm" else tokenizer.pad_id

    def decode(chunk: list[dict]) -> list[str]:
        prompts = np.asarray([tokenizer.encode(e["prompt"]) for e in chunk], np.int32)
        if kind == "arm":
            prompts = np.concatenate([np.full((len(chunk), 1), tokenizer.bos_id, np.int32), prompts], 1)
        x = np.concatenate([prompts, np.full((len(chunk), gen), fill, np.int32)], 1)
        return decode_texts(trainer, tokenizer, jnp.asarray(x), gen_length=gen, steps=int(opts.decode_steps) or gen,
                            block_length=block, mask_id=int(mask_id if mask_id is not None else 0),
                            attention=trainer.attention, causal=kind == "arm")

    return checked_accuracy(examples, check, decode, batch_size=batch_size)[0]


def heldout_loss(trainer, config, rows, *, kind: str, mask_id: int | None, eos_id: int) -> float:
    """The held-out NLL (ARM) or ELBO (MDM, diffusion.elbo_masks masks per example) of rows."""
    batches = batches_of(rows, min(64, len(rows["inputs"])))
    if kind == "arm":
        return evaluate_batches(trainer, lm_loss_fn(derived(config, {"train.loss": "sft_xent"}), trainer.attention),
                                batches)
    return heldout_elbo(trainer, config, batches, mask_id=mask_id, eos_id=eos_id)


def stats_of(values) -> dict:
    v = np.asarray(values, np.float64)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0, "min": float(v.min()),
            "max": float(v.max()), "median": float(np.median(v))}


# ------------------------------------------------------------------------------------------ stage B: fine-tuning


def finetune_base(config, kind: str) -> ml_collections.ConfigDict:
    """Stage B's config before the replica's batch: the kind's attention (ARM causal) and the SFT loss."""
    return derived(config, {"model.causal": kind == "arm", "train.loss": "sft_xent"})


def replica_batch_size(base) -> int:
    """train.batch_size times the method's batch multiplier (the compute-matched controls)."""
    return int(base.train.batch_size) * int(method_spec(base.mdm_variance.method).get("batch_multiplier", 1))


def replica_config(base) -> ml_collections.ConfigDict:
    """The config one fine-tuning replica's Trainer gets (no periodic eval: greedy accuracy and the held-out loss
    are measured after training)."""
    return derived(base, {"train.batch_size": replica_batch_size(base), "train.eval_batches": 0})


@TASKS.register("mdm_variance/finetune")
def finetune(config, workdir: str) -> dict:
    start_time = time.time()
    opts = config.mdm_variance
    spec = method_spec(opts.method)
    if spec.get("control_variate"):
        raise ValueError("mdm_variance.method='ema' leaves every gradient unchanged (see variance.py, Q7); it is "
                         "measured by mdm_variance/variance, not fine-tuned")
    kind = kind_of(config)
    use_compile_cache(config, workdir)
    os.makedirs(workdir, exist_ok=True)
    base = finetune_base(config, kind)
    tokenizer = tokenizer_of(base, workdir)
    mask_id = mask_id_for(base, tokenizer) if kind == "mdm" else None
    train_rows = make_rows(tokenizer, load_examples(base, "train", int(base.data.n_train)), int(base.data.seq_len),
                           "data.n_train")
    test = load_examples(base, "test", int(opts.eval_examples))
    test_rows = make_rows(tokenizer, test, int(base.data.seq_len), "mdm_variance.eval_examples")
    theta0 = theta0_params(ensure_theta0(base, workdir, kind))
    t_sampler, mask_sampler = build_samplers(base, tokenizer)
    batch_size = replica_batch_size(base)

    from shared.train.sft import SFTBatchIterator

    per_seed, theta0_acc, ppots_record = [], None, None
    for s in range(int(opts.seeds)):
        seed = int(base.seed) + s
        seed_dir = os.path.join(workdir, f"seed_{s}")
        path = os.path.join(seed_dir, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                per_seed.append(json.load(f))
            continue
        # config.seed stays theta0's: the model-init program (whose result theta0 replaces) is then the same for
        # every replica and compiles once; the replica seed drives the step rng and the data order below.
        cfg = replica_config(base)
        cfg.mdm_variance.replica_seed = seed
        os.makedirs(seed_dir, exist_ok=True)
        write_config(cfg, seed_dir)
        factory = None
        if kind == "mdm":
            factory = mdm_loss_factory(cfg, mask_id=mask_id, eos_id=tokenizer.eos_id, t_sampler=t_sampler,
                                       mask_sampler=mask_sampler)
        trainer = Trainer(cfg, seed_dir, init_params=placed(theta0), loss_fn_factory=factory)
        if trainer.start_step == 0:
            trainer.state["rng"] = jax.device_put(jax.random.key(seed), trainer.state["rng"].sharding)
        if theta0_acc is None and trainer.start_step == 0:
            theta0_acc = greedy_accuracy(trainer, tokenizer, test, kind=kind, config=cfg, mask_id=mask_id)
        if isinstance(t_sampler, PPOTSSampler) and t_sampler.density is None:
            # estimated once per point at theta0 (identical for every seed), kept in <workdir>/ppots.json
            rows = {k: v[: int(opts.ppots.n_x0)] for k, v in train_rows.items()}
            ppots_record = t_sampler.prepare(trainer, [rows], dict(
                mask_id=mask_id, eos_id=tokenizer.eos_id, options=diffusion_options(cfg),
                path=os.path.join(workdir, "ppots.json")))
        train_iter = SFTBatchIterator(train_rows, batch_size, seed=seed)
        summary = trainer.fit(train_iter, [])
        summary["eval/accuracy"] = greedy_accuracy(trainer, tokenizer, test, kind=kind, config=cfg, mask_id=mask_id)
        key = "eval/nll" if kind == "arm" else "eval/elbo"
        summary[key] = heldout_loss(trainer, cfg, test_rows, kind=kind, mask_id=mask_id, eos_id=tokenizer.eos_id)
        if theta0_acc is not None:
            summary["eval/accuracy_theta0"] = theta0_acc
        trainer.metrics_writer.write(summary["steps"], {k: summary[k] for k in ("eval/accuracy", key)})
        summary["seed"] = seed
        print(f"[mdm_variance] {opts.method} seed {seed}: accuracy {summary['eval/accuracy']:.3f}, "
              f"{key} {summary[key]:.4f}", flush=True)
        write_summary(seed_dir, summary)
        trainer.close()
        per_seed.append(summary)

    accuracies = [s["eval/accuracy"] for s in per_seed]
    loss_key = "eval/nll" if kind == "arm" else "eval/elbo"
    out = {"method": opts.method, "kind": kind, "seeds": len(per_seed), "steps": int(base.train.steps),
           "acc/seeds": accuracies, "acc/theta0": next((s.get("eval/accuracy_theta0") for s in per_seed
                                                        if "eval/accuracy_theta0" in s), None),
           "wall_time_s": time.time() - start_time, "batch_size": batch_size,
           "params": per_seed[0].get("params"), "device_kind": per_seed[0].get("device_kind"),
           "diverged": any(s.get("diverged") for s in per_seed)}
    out.update({f"acc/{k}": v for k, v in stats_of(accuracies).items()})
    out.update({f"{loss_key.split('/')[1]}/{k}": v for k, v in stats_of([s[loss_key] for s in per_seed]).items()})
    out["train/loss"] = float(np.mean([s.get("train/loss", np.nan) for s in per_seed]))
    if ppots_record is None and os.path.exists(os.path.join(workdir, "ppots.json")):
        with open(os.path.join(workdir, "ppots.json")) as f:
            ppots_record = json.load(f)
    if ppots_record:
        out.update({f"ppots/{k}": v for k, v in ppots_record.items() if isinstance(v, (int, float))})
    write_summary(workdir, out)
    return out


# ------------------------------------------------------------------------------------------ variance table


@TASKS.register("mdm_variance/variance")
def variance(config, workdir: str) -> dict:
    start_time = time.time()
    opts, vopts = config.mdm_variance, config.mdm_variance.variance
    spec = method_spec(opts.method)
    kind = kind_of(config)
    use_compile_cache(config, workdir)
    os.makedirs(workdir, exist_ok=True)
    base = derived(config, {"model.causal": kind == "arm", "train.eval_batches": 0})
    tokenizer = tokenizer_of(base, workdir)
    theta0 = theta0_params(ensure_theta0(base, workdir, kind))
    trainer = Trainer(base, os.path.join(workdir, "model"), init_params=placed(theta0))
    a, n = int(vopts.a), int(vopts.batch)
    pool_rows = make_rows(tokenizer, load_examples(base, "test", max(a, 2 * n)), int(base.data.seq_len),
                          "mdm_variance.variance")
    out = {"method": opts.method, "kind": kind, "steps": 0}
    rng_np = np.random.default_rng(int(base.seed))

    with sh.use_mesh(trainer.mesh, trainer.rules):
        if kind == "arm":
            loss_fn = lm_loss_fn(derived(base, {"train.loss": "sft_xent"}), trainer.attention)
            per_row = jax.jit(lambda p, b: loss_fn(trainer.graphdef, p, b, jax.random.key(0))[0])
            per_sample = np.array([float(per_row(trainer.params, {k: v[i:i + 1] for k, v in pool_rows.items()}))
                                   for i in range(a)])
            C = float(per_sample.var(ddof=1))
            out.update({"A": 0.0, "B": 0.0, "C": C, "sum": C, "total": C, "mean": float(per_sample.mean())})
            means = [float(per_sample[rng_np.permutation(len(per_sample))[:n]].mean())
                     for _ in range(int(vopts.batch_reps))]
            out["batch_var"] = n * float(np.var(means, ddof=1))
        else:
            mask_id = mask_id_for(base, tokenizer)
            dopts = diffusion_options(base)
            t_sampler, mask_sampler = build_samplers(base, tokenizer)
            if isinstance(t_sampler, PPOTSSampler):
                train_rows = make_rows(tokenizer, load_examples(base, "train", int(opts.ppots.n_x0)),
                                       int(base.data.seq_len), "mdm_variance.ppots.n_x0")
                record = t_sampler.prepare(trainer, [train_rows], dict(
                    mask_id=mask_id, eos_id=tokenizer.eos_id, options=dopts,
                    path=os.path.join(workdir, "ppots.json")))
                out.update({f"ppots/{k}": v for k, v in record.items() if isinstance(v, (int, float))})
            x0, eligible, seg, pos = mdm_inputs({k: jnp.asarray(v) for k, v in pool_rows.items()}, "sft",
                                                dopts.answer_padding, tokenizer.eos_id)

            @jax.jit
            def loss_of_draw(params, x0, draw):
                rows = x0.shape[0]
                logits_fn = model_logits_fn(trainer.graphdef, params, trainer.attention,
                                            None if seg is None else seg[:1].repeat(rows, 0), pos[:1].repeat(rows, 0))
                return masked_losses(logits_fn, x0, draw, mask_id)

            draw_losses = lambda x, d: loss_of_draw(trainer.params, x, d)  # noqa: E731
            l = V.sample_losses(draw_losses, x0[:a], eligible[:a], b=int(vopts.b), c=int(vopts.c),
                                t_sampler=t_sampler, mask_sampler=mask_sampler, eps=float(dopts.eps),
                                seed=int(base.seed), chunk=int(vopts.chunk))
            parts = V.decompose(l)
            out.update(parts)
            out["decomposition_error"] = abs(parts["total"] - parts["sum"]) / max(parts["total"], 1e-12)
            if spec.get("mask") in ("mirror", "multi"):
                rho = V.pair_correlation(draw_losses, x0[:a], eligible[:a], ts=list(vopts.rho_ts),
                                         c=int(vopts.rho_c), mask_sampler=mask_sampler, eps=float(dopts.eps),
                                         seed=int(base.seed))
                out.update({f"rho/t{t:g}": r for t, r in zip(vopts.rho_ts, rho)})
                low = [r for t, r in zip(vopts.rho_ts, rho) if t < 0.5]
                out["rho/mean_below_half"] = float(np.mean(low)) if low else float("nan")

            @jax.jit
            def batch_stats(params, x0, eligible, rng):
                logits_fn = model_logits_fn(trainer.graphdef, params, trainer.attention, None,
                                            pos[:1].repeat(x0.shape[0], 0))
                return V.per_sample_stats(logits_fn, x0, eligible, rng, t_sampler, mask_sampler, mask_id,
                                          float(dopts.eps))

            cv = V.BinEMAControlVariate(int(vopts.ema_bins), float(vopts.ema_rate))
            plain, adjusted = [], []
            rng = jax.random.key(int(base.seed) + 1)
            for r in range(int(vopts.batch_reps) * 2):  # first half warms the EMAs up
                rng, sub = jax.random.split(rng)
                pick = rng_np.permutation(x0.shape[0])[:n]
                t, loss, h = (np.asarray(v) for v in batch_stats(trainer.params, x0[pick], eligible[pick], sub))
                adj = cv(t, loss, h)
                if r >= int(vopts.batch_reps):
                    plain.append(loss.mean())
                    adjusted.append(adj.mean())
            out["batch_var"] = n * float(np.var(plain, ddof=1))
            out["batch_var_ema"] = n * float(np.var(adjusted, ddof=1))
            if spec.get("control_variate"):
                out["batch_var"] = out["batch_var_ema"]
            loss_fn = mdm_loss_fn(base, trainer.attention, mask_id=mask_id, eos_id=tokenizer.eos_id,
                                  t_sampler=t_sampler, mask_sampler=mask_sampler)
        grad_fn = jax.jit(jax.grad(lambda p, b, r: loss_fn(trainer.graphdef, p, b, r)[0]))
        pool = {k: v for k, v in pool_rows.items()}
        out["grad_noise"] = V.gradient_noise(grad_fn, trainer.params, pool, n=n, reps=int(vopts.grad_reps),
                                             seed=int(base.seed))
    out["wall_time_s"] = time.time() - start_time
    out["device_kind"] = jax.devices()[0].device_kind
    print(f"[mdm_variance] variance {opts.method}: " + ", ".join(
        f"{k}={v:.4g}" for k, v in out.items() if isinstance(v, float)), flush=True)
    write_summary(workdir, out)
    trainer.close()
    return out
