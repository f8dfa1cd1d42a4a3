"""Ahead-of-time compile of every jitted step a run makes, for a TPU topology, on a machine without a TPU.

    python -m shared.aot --config=experiments/<p>/<x>.py[:variant] --mesh=v5e_16 [--steps=all|NAME,...]
        [--prompt_len=256] [--json=FILE] [--config.a.b=v ...]
    python -m shared.aot.fit_table --out=tpu_configs/FIT.md      # the paper-scale configs (shared/aot/fit_table.py)

With `jax[tpu]` installed (libtpu), `jax.experimental.topologies` describes the preset's TPU slice (multislice
presets too: v5p_256x2 is two v5p-256 slices). Each jitted program the task compiles in a run is built by the
run's own code (the loss functions, `make_train_step` through `Trainer.train_step`, `RMTrainer._make_step`, the
learner's log-prob pass and micro-batch split, the rollout role's `Rollout` and `Sampler`) on abstract inputs
placed on that topology with the shardings a run gives them (shared/aot/steps.py), lowered and compiled. What a
run sizes from the device's free memory (rl.micro_batch_tokens, rl.rollout_max_rows and rl.rollout_mesh at 0 /
"auto", shared/rl/budget.py) is sized by the same functions with the chip's HBM as the limit and the run's
resident state at that point (training state, reference, rollout copy) as in use.

Per program it prints per chip the argument / temp / output bytes, what the run holds in HBM besides the
program's arguments while it runs (RL: the optimizer state during a rollout, the reference), their sum
("needed") against the chip's HBM, the FLOPs and bytes accessed, and the time at the chip's peak (model FLOPs /
peak FLOP/s; for the sampler's decode loop at least the weights and the written KV cache read once per decode
step / HBM bandwidth, when that is longer). Then the run's largest need and one step's time (RL: every program x
its calls per RL step). A program the TPU compiler refuses for lack of HBM, or whose need exceeds the HBM, makes
the command exit 1 with one line naming the program, the chip, the bytes needed and the HBM.

Covered (the program names; `--steps` takes names or prefixes, e.g. `--steps=rl` or `--steps=sampler`):
  train                  the Trainer's jitted, donated step (gradient accumulation over train.micro_batches) of
                         pretrain and sft (loss config.train.loss; packed text or SFT rows), rm and the project
                         tasks in shared.rm.RM_TASKS (Bradley-Terry loss; with rm.loss_hooks RMTrainer's step
                         that also updates the hooks' own parameters `aux`; pair columns a hook reads are found by
                         tracing), mdm (the masked-diffusion loss with config.diffusion's samplers; a t-sampler
                         fitted at theta0, P-POTS, is compiled with its prepare_abstract() stand-in density)
  rl/sft_warmup          the RL task's SFT warm start (rl.warmup_sft_steps > 0 without train.init_from)
  rl/update              one optimizer step of the RL update: the policy loss (+ KL, entropy, the critic's loss)
                         on prompts_per_step x group_size / rl.mini_batches rollouts, in the micro-batches the
                         learner picks (update_micro_rows: rl.micro_batch_tokens, at least train.micro_batches)
  rl/logprobs            the behaviour log-prob pass, when the learner needs one (needs_behaviour_pass)
  rl/ref_logprobs        the same pass over the compute-dtype reference (rl.kl_coef > 0)
  sampler/generate       the rollout: the Sampler's one program (prefill and the decode while-loop) on the rollout
                         role's mesh, in the calls Sampler.call_plan makes of rl.rollout_max_rows rows; prompts
                         are --prompt_len tokens (default 256: no tokenizer or data is read)
  sampler/pooled         the pooled-hidden forward over a sampler call's rows, when an RL hook asks for the
                         rollouts' hidden states (CLIPO)
  mdm_variance/theta0, mdm_variance/finetune
                         projects/mdm_variance/aot.py: stage A's step and a replica's fine-tuning step
A project adds its task's programs with `register_steps(task)` in `projects/<p>/aot.py` (imported by name).

Not yet: evaluation programs (the Trainer's eval step, the RL greedy / pass@k rollouts, which run in calls of at
most rl.rollout_max_rows rows like the training rollouts; SFT greedy and LLaDA decoding), the CLIPO head's small
jits, the mdm_variance variance task's measurement passes; the time of collectives (the estimate is compute or
HBM bound only); XLA's own reservations on the chip beyond what the compiler reports. Nothing here has run on
TPU hardware.
"""
from __future__ import annotations

from typing import Callable

from shared.aot.core import (GIB, LOGPROB_HINT, RL_UPDATE_HINT, SAMPLER_HINT, STEP_BUILDERS,  # noqa: F401
                             TOPOLOGIES, TPU_CHIPS, DoesNotFit, Options, Program, Report, Slice, compile_program,
                             does_not_fit_message, duration, register_steps, run_step_time_s, slice_header,
                             summary_line, topology_devices)


def builder_for(config) -> Callable:
    import importlib

    from shared.aot import steps as builtin_steps  # registers the built-in builders

    task = str(config.task)
    builtin_steps.register_rm_tasks()  # projects' RM tasks (shared.rm.RM_TASKS) compile as the rm task
    if task not in STEP_BUILDERS and config.get("project"):
        project = str(config.project)
        module = f"{project if '.' in project else 'projects.' + project}.aot"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
    if task not in STEP_BUILDERS:
        raise ValueError(f"task={task!r}: the AOT check knows the programs of {', '.join(sorted(STEP_BUILDERS))} "
                         f"(a project adds its task's with shared.aot.register_steps in projects/<p>/aot.py)")
    return STEP_BUILDERS[task]


def programs(config, sl: Slice, options: Options | None = None) -> list[Program]:
    """The jitted programs a run of `config` compiles on the slice (those options.steps selects)."""
    options = options or Options()
    built = builder_for(config)(config, sl, options)
    chosen = [p for p in built if options.wants(p.step)]
    if not chosen:
        names = ", ".join(p.step for p in built) or "none"
        raise ValueError(f"--steps={','.join(options.steps)}: no such program in this run (it has: {names})")
    return chosen


def check(config, preset: str, options: Options | None = None) -> list[Report]:
    """Compiles every program of config's run for `preset`'s TPU topology: one Report per program (see
    does_not_fit_message for the verdict)."""
    sl = Slice.of(preset)
    return [compile_program(p, sl) for p in programs(config, sl, options)]
