"""The "mdm" task: masked-diffusion pre-training or SFT through the shared Trainer (TASKS "mdm").

    c.task = "mdm"; c.model.causal = False; c.diffusion = shared.diffusion.diffusion_config()

diffusion.stage "sft": data as the sft task reads it (data.source "rl/<task>" or "jsonl"; shared.train.sft),
prompt never masked; "pretrain": packed text as the pretrain task reads it, every token maskable.
The t-sampler and mask-sampler are the ones config.diffusion names; a t-sampler with a
`prepare(trainer, batches, loss_helper)` method (e.g. one fitted at the initial model, like P-POTS) is prepared
after the initial parameters exist and before the first step compiles. After SFT on an rl task, greedy LLaDA
decoding of data.greedy_eval_examples test prompts gives "eval/greedy_accuracy"; "eval/elbo" is the held-out
uniform-t ELBO (diffusion.elbo_masks masks per example).

The pieces are reusable by projects' own diffusion tasks: mask_id_for, mdm_loss_factory, decode_texts (a batch
of prompts completed by LLaDA or AR greedy decoding), checked_accuracy (a checker over decoded chunks),
evaluate_batches / heldout_elbo (a loss over process-local batches with the trainer's parameters).
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


# ------------------------------------------------------------------------------------------ reusable pieces


def mask_id_for(config, tokenizer) -> int:
    """The [MASK] id config.diffusion names for this tokenizer and config.model.vocab_size."""
    return resolve_mask_id(diffusion_options(config), tokenizer.vocab_size, config.model.vocab_size)


def mdm_loss_factory(config, *, mask_id: int, eos_id: int | None, t_sampler=None, mask_sampler=None, options=None):
    """Trainer(loss_fn_factory=...) of the MDM loss: attention -> mdm_loss_fn(config, attention, ...) (the
    samplers default to the ones config.diffusion names)."""
    return lambda attention: mdm_loss_fn(config, attention, mask_id=mask_id, eos_id=eos_id, t_sampler=t_sampler,
                                         mask_sampler=mask_sampler, options=options)


def until_eos(ids, eos_id: int) -> list[int]:
    """ids up to (not including) the first eos_id."""
    ids = list(ids)
    return ids[:ids.index(eos_id)] if eos_id in ids else ids


def decode_texts(trainer, tokenizer, x, segment_ids=None, positions=None, *, gen_length: int, steps: int,
                 block_length: int, mask_id: int, attention: str = "xla", causal: bool = False) -> list[str]:
    """Rows x [B, T] (a prompt, then gen_length fill slots) completed with the trainer's parameters (LLaDA
    decoding, or AR greedy when causal; decode_batch): each row's generated text, cut at the first eos."""
    gen_start = x.shape[1] - gen_length
    with sh.use_mesh(trainer.mesh, trainer.rules):
        out = decode_batch(trainer.graphdef, trainer.params, x, segment_ids, positions, gen_start=gen_start,
                           gen_length=gen_length, steps=steps, block_length=block_length, mask_id=mask_id,
                           attention=attention, causal=causal)
    out = np.asarray(jax.device_get(out))[:, gen_start:]
    return [tokenizer.decode(until_eos(ids, tokenizer.eos_id)) for ids in out]


def checked_accuracy(examples: list[dict], check, decode, *, batch_size: int,
                     keep_samples: int = 0) -> tuple[float, list[dict]]:
    """(fraction of `examples` whose completion `check(example, text)` accepts, the first `keep_samples`
    {prompt, completion, answer, correct}); `decode(chunk) -> texts` completes batch_size examples at a time."""
    correct, samples = 0, []
    for s in range(0, len(examples), batch_size):
        chunk = examples[s:s + batch_size]
        for example, text in zip(chunk, decode(chunk)):
            ok = bool(check(example, text))
            correct += ok
            if len(samples) < keep_samples:
                samples.append({"prompt": example["prompt"], "completion": text, "answer": example["answer"],
                                "correct": ok})
    return correct / max(len(examples), 1), samples


def evaluate_batches(trainer, loss_fn, batches: list[dict]) -> float:
    """Mean loss of `loss_fn` over process-local `batches` with the trainer's parameters (evaluate_loss)."""
    with sh.use_mesh(trainer.mesh, trainer.rules):
        return evaluate_loss(loss_fn, trainer.graphdef, trainer.params, [trainer.to_global(b) for b in batches])


def heldout_elbo(trainer, config, batches: list[dict], *, mask_id: int, eos_id: int | None) -> float:
    """The held-out uniform-t ELBO (diffusion.elbo_masks masks per example) over process-local `batches`."""
    elbo = elbo_loss_fn(config, trainer.attention, mask_id=mask_id, eos_id=eos_id,
                        masks=int(diffusion_options(config).elbo_masks))
    return evaluate_batches(trainer, elbo, batches)


# ------------------------------------------------------------------------------------------ the task


def diffusion_greedy_eval(trainer, tokenizer, config, task: str, examples: list[dict], *, mask_id: int,
                          batch_size: int = 64) -> dict:
    """Greedy accuracy of LLaDA decoding on `examples` of rl task `task` (judged by its checker)."""
    from shared.data.examples import checker

    opts = diffusion_options(config)
    check = checker(task)
    gen = int(opts.decode_tokens)
    block = min(int(opts.decode_block), gen)
    steps = int(opts.decode_steps) or gen

    def decode(chunk: list[dict]) -> list[str]:
        prompts = [list(tokenizer.encode(e["prompt"])) for e in chunk]
        x, seg, pos = prompt_layout(prompts, gen, pad_id=tokenizer.pad_id, fill_id=mask_id)
        return decode_texts(trainer, tokenizer, x, seg, pos, gen_length=gen, steps=steps, block_length=block,
                            mask_id=mask_id)

    accuracy, samples = checked_accuracy(examples, check, decode, batch_size=batch_size, keep_samples=4)
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
    mask_id = mask_id_for(config, tokenizer)
    t_sampler = make_t_sampler(opts.t_sampler, opts.t_options)
    mask_sampler = make_mask_sampler(opts.mask_sampler, opts.mask_options)
    trainer = Trainer(config, workdir, init_params=params_initializer(config),
                      loss_fn_factory=mdm_loss_factory(config, mask_id=mask_id, eos_id=tokenizer.eos_id,
                                                       t_sampler=t_sampler, mask_sampler=mask_sampler, options=opts))
    if hasattr(t_sampler, "prepare"):  # before the first step traces the loss (it reads the fitted density)
        t_sampler.prepare(trainer, eval_batches, dict(mask_id=mask_id, eos_id=tokenizer.eos_id, options=opts))
    print(f"[mdm] {sum(x.size for x in jax.tree.leaves(trainer.params)) / 1e6:.2f}M parameters, stage "
          f"{opts.stage}, t-sampler {opts.t_sampler}, mask-sampler {opts.mask_sampler}, [MASK]={mask_id}, steps "
          f"{trainer.start_step}->{config.train.steps}", flush=True)
    summary = trainer.fit(train_iter, eval_batches)
    summary.update(stats)
    if not summary["diverged"]:
        if eval_batches:
            summary["eval/elbo"] = heldout_elbo(trainer, config, eval_batches, mask_id=mask_id, eos_id=tokenizer.eos_id)
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
