"""The project's tasks for `python -m shared.aot` (shared/aot): the jitted training steps their runs compile.

    mdm_variance/theta0     stage A's step (tasks.theta0_config: MDM pre-training loss, or next-token for
                            "arm")
    mdm_variance/finetune   one replica's fine-tuning step (tasks.replica_config, the method's samplers; ARM:
                            the SFT loss), task mdm_variance/finetune only

mdm_variance/variance compiles stage A's step here; its measurement passes (per-draw losses, gradient noise) are
not covered. The tokenizer is built from config.data as the task builds it (the byte tokenizer needs no files);
batches are the task's SFT rows (tasks.make_rows) in both stages.
"""
from __future__ import annotations

import tempfile

from shared.aot import Options, Slice, register_steps
from shared.aot.steps import lm_programs, mdm_program
from projects.mdm_variance.methods import build_samplers
from projects.mdm_variance.tasks import finetune_base, kind_of, replica_config, theta0_config, tokenizer_of


@register_steps("mdm_variance/finetune", "mdm_variance/variance")
def steps(config, sl: Slice, options: Options):
    kind = kind_of(config)
    fine_tune = config.task == "mdm_variance/finetune"
    base = finetune_base(config, kind) if fine_tune else config
    with tempfile.TemporaryDirectory() as workdir:
        tokenizer = tokenizer_of(base, workdir)
    out = []
    if options.wants("mdm_variance/theta0"):  # a stage of its own before the replicas (shared by a sweep)
        theta0 = theta0_config(base, kind)
        if kind == "mdm":
            out.append(mdm_program("mdm_variance/theta0", theta0, sl, eos_id=tokenizer.eos_id,
                                   tokenizer_vocab=tokenizer.vocab_size, sft_rows=True))
        else:
            out += lm_programs(theta0, sl, step="mdm_variance/theta0", sft_rows=True)
        out[-1].stage = "theta0" if fine_tune else ""
    if fine_tune and options.wants("mdm_variance/finetune"):
        cfg = replica_config(base)
        if kind == "mdm":
            t_sampler, mask_sampler = build_samplers(base, tokenizer)
            out.append(mdm_program("mdm_variance/finetune", cfg, sl, t_sampler=t_sampler, mask_sampler=mask_sampler,
                                   eos_id=tokenizer.eos_id, tokenizer_vocab=tokenizer.vocab_size, sft_rows=True))
        else:
            out += lm_programs(cfg, sl, step="mdm_variance/finetune", sft_rows=True)
    return out
