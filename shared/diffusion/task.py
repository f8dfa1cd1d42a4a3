"""The "mdm" task: masked-diffusion pre-training or SFT through the shared Trainer (TASKS "mdm").

    c.task = "mdm"; c.model.causal = False; c.diffusion = shared.diffusion.diffusion_config()

diffusion.stage "sft": data as the sft task reads it (data.source "rl/<task>" or "jsonl"; shared.train.sft),
prompt never masked; "pretrain": packed text as the pretrain task reads it, every token maskable.
The t-sampler and mask-sampler are the ones config.diffusion names; a t-sampler with a
`prepare(trainer, batches, loss_helper)` method (e.g. one fitted at the initial model, like P-POTS) is prepared
after the initial parameters exist and before the first step compiles. After SFT on an rl task, greedy LLaDA
decoding of data.greedy_eval_examples test prompts gives "eval/greedy_accuracy"; "eval/elbo" is the held-out
uniform-t ELBO (diffusion.elbo_masks masks per example).
"""
from __future__ import annotations

import math

import jax
import numpy as np

from shared import sharding as sh
from shared.diffusion.decode import decode_batch, prompt_layout
from shared.diffusion.loss import (diffusion_options, elbo_loss_fn, evaluate_loss, mdm_loss_fn,
                                   resolve_mask_id)
from shared.diffusion.samplers import make_mask_sampler, make_t_sampler
from shared.registry import TASKS
from shared.train.tasks import build_data, finished_summary, params_initializer
from shared.train.trainer import Trainer, write_summary


def diffusion_greedy_eval(trainer, tokenizer, config, task: str, examples: list[dict], *, mask_id: int,
                          batch_size: int = 64) -> dict:
    """Greedy accuracy of LLaDA decoding on `examples` of rl task `task` (judged by its checker)."""
    from shared.data.examples import checker

    opts = diffusion_options(config)
    check = checker(task)
    gen = int(opts.decode_tokens)
    block = min(int(opts.decode_block), gen)
    steps = int(opts.decode_steps) or gen
    params = trainer.params
    correct, samples = 0, []
    for s in range(0, len(examples), batch_size):
        chunk = examples[s:s + batch_size]
        prompts = [list(tokenizer.encode(e["prompt"])) for e in chunk]
        x, seg, pos = prompt_layout(prompts, gen, pad_id=tokenizer.pad_id, fill_id=mask_id)
        with sh.use_mesh(trainer.mesh, trainer.rules):
            out = decode_batch(trainer.graphdef, params, x, seg, pos, gen_start=x.shape[1] - gen, gen_length=gen,
                               steps=steps, block_length=block, mask_id=mask_id, attention="xla")
        out = np.asarray(jax.device_get(out))[:, x.shape[1] - gen:]
        for example, ids in zip(chunk, out):
            ids = list(ids)
            if tokenizer.eos_id in ids:
                ids = ids[:ids.index(tokenizer.eos_id)]
            text = tokenizer.decode(ids)
            ok = bool(check(example, text))
            correct += ok
            if len(samples) < 4:
                samples.append({"prompt": example["prompt"], "completion": text, "answer": example["answer"],
                                "correct": ok})
    accuracy = correct / max(len(examples), 1)
    print(f"[mdm] eval/greedy_accuracy = {accuracy:.3f} over {len(examples)} examples", flush=True)
    return {"eval/greedy_accuracy": accuracy, "greedy_samples": samples}


@TASKS.register("mdm")
def mdm(config, workdir: str) -> dict:
    done = finished_summary(workdir, config, announce="mdm")
    if done is not None:
        return done
    opts = diffusion_options(config)
    if config.model.causal:
        print("[mdm] note: model.causal=True; masked diffusion models are normally bidirectional", flush=True)
    stats, task, greedy_sets = {}, None, {}
    if opts.stage == "sft":
        from shared.train.sft import build_sft_data, greedy_eval_sets

        tokenizer, train_iter, eval_batches, stats, task = build_sft_data(config, workdir)
        greedy_sets = greedy_eval_sets(config, task)
    else:
        tokenizer, train_iter, eval_batches = build_data(config, workdir)
    mask_id = resolve_mask_id(opts, tokenizer.vocab_size, config.model.vocab_size)
    t_sampler = make_t_sampler(opts.t_sampler, opts.t_options)
    mask_sampler = make_mask_sampler(opts.mask_sampler, opts.mask_options)
    trainer = Trainer(config, workdir, init_params=params_initializer(config),
                      loss_fn_factory=lambda attention: mdm_loss_fn(
                          config, attention, mask_id=mask_id, eos_id=tokenizer.eos_id, t_sampler=t_sampler,
                          mask_sampler=mask_sampler, options=opts))
    if hasattr(t_sampler, "prepare"):  # before the first step traces the loss (it reads the fitted density)
        t_sampler.prepare(trainer, eval_batches, dict(mask_id=mask_id, eos_id=tokenizer.eos_id, options=opts))
    print(f"[mdm] {sum(x.size for x in jax.tree.leaves(trainer.params)) / 1e6:.2f}M parameters, stage "
          f"{opts.stage}, t-sampler {opts.t_sampler}, mask-sampler {opts.mask_sampler}, [MASK]={mask_id}, steps "
          f"{trainer.start_step}->{config.train.steps}", flush=True)
    summary = trainer.fit(train_iter, eval_batches)
    summary.update(stats)
    if not summary["diverged"]:
        if eval_batches:
            elbo = elbo_loss_fn(config, trainer.attention, mask_id=mask_id, eos_id=tokenizer.eos_id,
                                masks=int(opts.elbo_masks))
            with sh.use_mesh(trainer.mesh, trainer.rules):
                summary["eval/elbo"] = evaluate_loss(elbo, trainer.graphdef, trainer.params,
                                                     [trainer.to_global(b) for b in eval_batches])
        for split, examples in greedy_sets.items():
            if split != "test":
                continue
            greedy = diffusion_greedy_eval(trainer, tokenizer, config, task, examples, mask_id=mask_id)
            summary.update(greedy)
        row = {k: v for k, v in summary.items() if k.startswith("eval/") and isinstance(v, float)
               and math.isfinite(v)}
        if row:
            trainer.metrics_writer.write(summary["steps"], row)
    write_summary(workdir, summary)
    trainer.close()
    return summary
