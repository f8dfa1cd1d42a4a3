"""The built-in tasks' jitted programs, built by the run's own code on abstract inputs for a TPU slice.

Nothing is materialised: parameters, optimizer state and batches are jax.ShapeDtypeStructs carrying the
shardings a run gives them. What the run decides from the device's free memory (the RL micro-batch tokens, the
sampler's rows per call and the rollout mesh, shared/rl/budget.py) is decided by the same functions with the TPU
chip's HBM as the limit and the run's resident state (training state, reference, rollout copy) as in use.
"""
from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from shared import sharding as sh
from shared.aot.core import LOGPROB_HINT, RL_UPDATE_HINT, SAMPLER_HINT, Options, Program, Slice, register_steps


# ------------------------------------------------------------------------------------------ helpers


def abstract(tree, shardings):
    """ShapeDtypeStructs of `tree`'s leaves with `shardings` (a matching tree, or one sharding for all)."""
    if isinstance(shardings, jax.sharding.Sharding):
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=shardings), tree)
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)


def bytes_per_chip(tree) -> int:
    """Bytes one chip holds of an abstract sharded pytree (its shard of every leaf)."""
    return sum(int(np.prod(x.sharding.shard_shape(x.shape))) * x.dtype.itemsize
               for x in jax.tree.leaves(tree))


def batch_arrays(spec: dict, mesh) -> dict:
    """{name: (shape, dtype)} -> abstract global arrays split over (data, fsdp), as Trainer.to_global places them."""
    return {name: jax.ShapeDtypeStruct(shape, dtype, sharding=sh.batch_sharding(mesh, len(shape)))
            for name, (shape, dtype) in spec.items()}


def lm_batch_spec(batch_size: int, seq_len: int, sft: bool) -> dict:
    """The batch of the LM tasks: shared.train.sft rows (with prompt_mask) or packed text (shared.data.pipeline)."""
    from shared.data.pipeline import BATCH_KEYS
    from shared.train.sft import SFT_BATCH_KEYS, empty_rows

    row = empty_rows(1, seq_len, 0)
    return {k: ((batch_size, seq_len), row[k].dtype) for k in (SFT_BATCH_KEYS if sft else BATCH_KEYS)}


def forward_flops_per_token(model_cfg, seq_len: int) -> float:
    from shared.metrics.flops import training_flops_per_token

    return training_flops_per_token(model_cfg, seq_len) / 3.0


@contextlib.contextmanager
def device_memory(limit: int, in_use: int):
    """shared.rl.budget.device_memory() answers (limit, in_use): the TPU chip's HBM and the run's resident bytes
    at that point, so the budget functions decide as they would on the chip."""
    from shared.rl import budget

    saved = budget.device_memory
    budget.device_memory = lambda: (int(limit), int(in_use))
    try:
        yield
    finally:
        budget.device_memory = saved


class AbstractTrainer:
    """What shared.train.Trainer holds, for a TPU slice and without materialising anything: the mesh, rules and
    attention the Trainer picks for the preset on "tpu", the graphdef, the abstract state {params, opt, step,
    rng, nonfinite} with the Trainer's shardings (opt_state_shardings), the optimizer and schedule, the loss_fn.
    `train_step` is the Trainer's own method (same jit, same donation)."""

    def __init__(self, config, sl: Slice, *, loss_fn=None, loss_fn_factory=None):
        from flax import nnx

        from shared.config.mesh import MESH_AXES, MeshPlan
        from shared.model import attention_implementation, build_model
        from shared.train.optim import make_optimizer
        from shared.train.step import lm_loss_fn
        from shared.train.trainer import opt_state_shardings

        self.config = config
        plan = MeshPlan.from_config(config.mesh)
        self.mesh = Mesh(plan.device_grid(sl.devices, multi_process=True), MESH_AXES)
        self.rules = sh.merge_rules(plan.rule_overrides)
        self.attention = attention_implementation(config.model, plan.preset, "tpu")
        self.hooks = []
        if loss_fn_factory is not None:
            loss_fn = loss_fn_factory(self.attention)
        self.loss_fn = loss_fn or lm_loss_fn(config, self.attention)
        replicated = NamedSharding(self.mesh, PartitionSpec())
        with sh.use_mesh(self.mesh, self.rules):
            self.graphdef, state = nnx.split(nnx.eval_shape(lambda: build_model(config.model)))
            shardings = sh.state_shardings(state, self.mesh, self.rules).to_pure_dict()
            params = abstract(state.to_pure_dict(), shardings)
            self.optimizer, self.schedule = make_optimizer(config.optim, int(config.train.steps), params)
            opt = abstract(jax.eval_shape(self.optimizer.init, params),
                           opt_state_shardings(self.optimizer, params, self.mesh))
        key = jax.eval_shape(lambda: jax.random.key(0))
        self.state = {"params": params, "opt": opt,
                      "step": jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated),
                      "rng": jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=replicated),
                      "nonfinite": jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated)}
        self._train_steps = {}

    @property
    def params(self):
        return self.state["params"]

    def train_step(self, micro_batches: int):
        from shared.train.trainer import Trainer

        return Trainer.train_step(self, micro_batches)

    def batch(self, spec: dict) -> dict:
        return batch_arrays(spec, self.mesh)


def train_program(step: str, trainer: AbstractTrainer, spec: dict, *, flops_per_token: float, fn=None,
                  hint: str | None = None, calls: int = 1, detail: str = "") -> Program:
    """The Trainer's step (or `fn`, a jitted step of the same signature) on a batch of `spec`."""
    config = trainer.config
    k = int(config.train.micro_batches)
    fn = fn or trainer.train_step(k)
    shape = next(iter(spec.values()))[0]
    tokens = int(np.prod(shape))
    rows = shape[0]
    detail = detail or (f"{rows} rows x {shape[1]} tokens" + (f" in {k} micro-batches" if k > 1 else ""))
    kwargs = {} if hint is None else {"hint": hint}
    return Program(step, fn, (trainer.state, trainer.batch(spec)), trainer.mesh, trainer.rules, tokens=tokens,
                   model_flops=flops_per_token * tokens, calls=calls, detail=detail, **kwargs)


# ------------------------------------------------------------------------------------------ pretrain, sft


def lm_programs(config, sl: Slice, step: str = "train", sft_rows: bool | None = None) -> list[Program]:
    """The Trainer's LM step; sft_rows: batches of shared.train.sft rows (default: task "sft") or packed text."""
    from shared.metrics.flops import training_flops_per_token

    trainer = AbstractTrainer(config, sl)
    seq = int(config.data.seq_len)
    spec = lm_batch_spec(int(config.train.batch_size), seq, sft=config.task == "sft" if sft_rows is None else sft_rows)
    return [train_program(step, trainer, spec, flops_per_token=training_flops_per_token(config.model, seq))]


@register_steps("pretrain", "sft")
def lm_steps(config, sl: Slice, options: Options) -> list[Program]:
    return lm_programs(config, sl)


# ------------------------------------------------------------------------------------------ reward models


def rm_programs(config, sl: Slice) -> list[Program]:
    """The RM task's step: the Trainer's with the Bradley-Terry loss_fn, or with rm.loss_hooks RMTrainer's own
    step (the hooks' `aux` updated in it). The pair rows of shared.rm.data; numeric columns a loss hook reads
    (attributes of the pairs) are found by tracing: each float32 [B] like the data's."""
    from shared.metrics.flops import training_flops_per_token
    from shared.rm.data import empty_rows
    from shared.rm.hooks import build_hooks
    from shared.rm.model import rm_loss_fn
    from shared.rm.trainer import RMTrainer, init_aux

    trainer = AbstractTrainer(config, sl, loss_fn_factory=lambda attention: rm_loss_fn(config, attention))
    hooks = build_hooks(config)
    fn = None
    if hooks:
        trainer.loss_hooks = hooks
        aux = jax.eval_shape(lambda: init_aux(hooks, config))
        if jax.tree.leaves(aux):
            trainer.state["aux"] = abstract(aux, NamedSharding(trainer.mesh, PartitionSpec()))
        else:
            trainer.state["aux"] = aux
        fn = jax.jit(RMTrainer._make_step(trainer), donate_argnums=0)
    b, seq = int(config.train.batch_size), int(config.data.seq_len)
    columns: list[str] = []
    flops = training_flops_per_token(config.model, seq) * (1 + any(h.has_update for h in hooks.values()) / 3)
    step_fn = fn or trainer.train_step(int(config.train.micro_batches))
    for _ in range(16):
        rows = empty_rows(1, seq, 0, columns)
        spec = {k: ((b,) + v.shape[1:], v.dtype) for k, v in rows.items()}
        try:
            with sh.use_mesh(trainer.mesh, trainer.rules):
                step_fn.trace(trainer.state, trainer.batch(spec))
            break
        except KeyError as e:  # a column of the data the hooks read
            name = e.args[0] if e.args else None
            if not isinstance(name, str) or name in rows:
                raise
            columns.append(name)
    program = train_program("train", trainer, spec, flops_per_token=flops, fn=step_fn)
    program.tokens = 2 * b * seq              # chosen and rejected rows
    program.model_flops = flops * program.tokens
    program.detail = f"{b} pairs x 2 x {seq} tokens" + (f" in {config.train.micro_batches} micro-batches"
                                                          if int(config.train.micro_batches) > 1 else "")
    return [program]


def _rm_tasks() -> set:
    from shared.rm import RM_TASKS

    return set(RM_TASKS)


@register_steps("rm")
def rm_steps(config, sl: Slice, options: Options) -> list[Program]:
    return rm_programs(config, sl)


# ------------------------------------------------------------------------------------------ masked diffusion


def mdm_program(step: str, config, sl: Slice, *, t_sampler=None, mask_sampler=None, eos_id: int = 1,
                tokenizer_vocab: int | None = None, sft_rows: bool | None = None) -> Program:
    """The MDM Trainer step (shared.diffusion.task.mdm_loss_factory) on the batches the mdm task feeds it: SFT
    rows (diffusion.stage "sft") or packed text ("pretrain"); sft_rows overrides (a project's own data)."""
    from shared.diffusion.loss import diffusion_options, resolve_mask_id
    from shared.diffusion.samplers import make_mask_sampler, make_t_sampler
    from shared.diffusion.task import mdm_loss_factory
    from shared.metrics.flops import training_flops_per_token

    opts = diffusion_options(config)
    t_sampler = t_sampler or make_t_sampler(opts.t_sampler, opts.t_options)
    mask_sampler = mask_sampler or make_mask_sampler(opts.mask_sampler, opts.mask_options)
    prepare_for_aot(t_sampler, opts.t_sampler)
    vocab = int(config.model.vocab_size)
    mask_id = resolve_mask_id(opts, tokenizer_vocab if tokenizer_vocab is not None else vocab - 1, vocab)
    trainer = AbstractTrainer(config, sl, loss_fn_factory=mdm_loss_factory(
        config, mask_id=mask_id, eos_id=eos_id, t_sampler=t_sampler, mask_sampler=mask_sampler, options=opts))
    seq, b = int(config.data.seq_len), int(config.train.batch_size)
    spec = lm_batch_spec(b, seq, sft=opts.stage == "sft" if sft_rows is None else sft_rows)
    masks = jax.eval_shape(lambda r: mask_sampler(r, jnp.zeros((1, seq), jnp.int32), jnp.ones((1, seq), jnp.float32),
                                                  jnp.full((1,), 0.5, jnp.float32)), jax.random.key(0)).masks.shape[0]
    program = train_program(step, trainer, spec, flops_per_token=training_flops_per_token(config.model, seq) * masks)
    if masks > 1:
        program.detail += f", {masks} masks per sequence"
    return program


def prepare_for_aot(t_sampler, name: str) -> None:
    """A t-sampler fitted at the initial model (`prepare`, e.g. P-POTS) gets its `prepare_abstract()` stand-in."""
    if hasattr(t_sampler, "prepare"):
        if not hasattr(t_sampler, "prepare_abstract"):
            raise ValueError(f"diffusion.t_sampler={name!r} is fitted at the initial parameters (prepare) and has no "
                             "prepare_abstract() stand-in: it cannot be compiled ahead of time")
        t_sampler.prepare_abstract()


@register_steps("mdm")
def mdm_steps(config, sl: Slice, options: Options) -> list[Program]:
    return [mdm_program("train", config, sl)]


# ------------------------------------------------------------------------------------------ RL


class _Tokenizer:
    """What the rollout role reads of a tokenizer at construction (ids are constants of the compiled program)."""

    def __init__(self, vocab_size: int):
        self.eos_id, self.pad_id, self.bos_id = vocab_size - 1, 0, 1

    def decode(self, ids):
        return ""


@register_steps("rl")
def rl_steps(config, sl: Slice, options: Options) -> list[Program]:
    """The programs of an RL run (shared/rl/learner.py), in the learner's order of construction so that the
    memory budgets see what a run has allocated at that point."""
    from shared.metrics.flops import training_flops_per_token
    from shared.model.sampler import SamplingParams
    from shared.model.transformer import CACHE_AXES, _cast_weights, init_cache
    from shared.registry import HOOKS
    from shared.rl import budget
    from shared.rl.learner import (RLHook, _batch_shards, _bytes_per_device, behaviour_fn, logprob_micro_rows,
                                   needs_behaviour_pass, rl_loss_fn, update_micro_rows)
    from shared.rl.roles import Actor, Rollout, build_critic, estimator
    from shared.rl.task import sft_warmup_config

    rl, m = config.rl, config.model
    out: list[Program] = []
    if int(rl.warmup_sft_steps) > 0 and not config.train.init_from and options.wants("rl/sft_warmup"):
        warm = lm_programs(sft_warmup_config(config), sl, step="rl/sft_warmup")
        for program in warm:
            program.stage = "SFT warm start"
        out += warm

    critic = build_critic(config, estimator(str(rl.advantage)))
    trainer = AbstractTrainer(config, sl, loss_fn_factory=lambda attention: rl_loss_fn(config, attention, critic))
    actor = Actor(trainer)
    if critic is not None:
        critic.attach(actor)
    hbm = sl.hbm
    state_bytes = bytes_per_chip(trainer.state)
    resident = state_bytes
    with device_memory(hbm, resident):
        rollout = Rollout(config, actor, _Tokenizer(int(m.vocab_size)))
    reference = None
    if float(rl.kl_coef) > 0:  # Reference.build: compute-dtype params on the training mesh
        cast = jax.eval_shape(lambda p: _cast_weights(p, jnp.dtype(m.dtype)), trainer.params)
        reference = abstract(cast, jax.tree.map(lambda p: p.sharding, trainer.params))
        resident += bytes_per_chip(reference)
    reference_bytes = bytes_per_chip(reference) if reference is not None else 0
    params_bytes = bytes_per_chip(trainer.params)
    with device_memory(hbm, resident):
        micro_batch_tokens = budget.micro_batch_tokens(config, _bytes_per_device(trainer.params))
    hooks = [HOOKS.get(name)(config) for name in config.train.hooks]
    needs_hidden = any(isinstance(h, RLHook) and h.needs_hidden for h in hooks)

    # the rollout: the role's compute-dtype copy on its mesh, rows per call from the budget with it allocated
    sampler = rollout.sampler
    if jnp.dtype(m.dtype) == jnp.float32 and rollout.mesh is actor.mesh:
        rollout_params = trainer.params  # the sampler reads the actor's own params: no copy
    else:
        shardings = rollout._shardings() or jax.tree.map(lambda p: p.sharding, trainer.params)
        rollout_params = abstract(jax.eval_shape(rollout._cast, trainer.params), shardings)
        resident += bytes_per_chip(rollout_params)
    prompt_len, t = int(options.prompt_len), int(rl.max_new_tokens)
    with device_memory(hbm, resident):
        max_rows = rollout.max_rows([[0] * prompt_len], t)
    p = sampler.bucket_for(prompt_len, SamplingParams.prompt_buckets)
    b, g = int(rl.prompts_per_step), int(rl.group_size)
    n = b * g
    per_call, padded, calls = sampler.call_plan(b, g, max_rows)
    if rl.dynamic_sampling:
        calls_note = f", up to {1 + int(rl.dynamic_sampling_max_tries)}x with dynamic sampling"
    else:
        calls_note = ""
    mesh_name = {"": "training mesh", "data": "data mesh", "tensor": "tensor mesh"}[rollout.kind]
    rows_note = (f"{per_call * g} of {n} rows per call (padded to {padded}), prompt bucket {p} + {t} new tokens, "
                 f"{mesh_name}{calls_note}")
    # held during the rollout besides the sampler's arguments: the training state and the reference
    during_rollout = state_bytes + reference_bytes - (params_bytes if rollout_params is trainer.params else 0)
    on_rollout = NamedSharding(rollout.mesh, PartitionSpec())
    key = jax.eval_shape(lambda: jax.random.key(0))
    prompt_tokens = jax.ShapeDtypeStruct((padded, p), jnp.int32, sharding=sampler.row_sharding((padded, p)))
    lengths = jax.ShapeDtypeStruct((padded,), jnp.int32, sharding=sampler.row_sharding((padded,)))
    slots = p + t
    cache = jax.eval_shape(lambda: init_cache(m, padded, slots))
    cache_spec = sh.spec_for(CACHE_AXES, cache["k"].shape, mesh=rollout.mesh, rules=sampler.rules)
    cache_chip = 2 * int(np.prod(NamedSharding(rollout.mesh, cache_spec).shard_shape(cache["k"].shape))) * \
        jnp.dtype(cache["k"].dtype).itemsize
    # each decode step reads the weights and the written part of the cache (on average half of it, plus the
    # prompt): a lower bound on the HBM traffic, which bounds decode time
    stream = t * (bytes_per_chip(rollout_params) + cache_chip * (p + t / 2) / slots)
    flops = padded * (p * forward_flops_per_token(m, p) + t * forward_flops_per_token(m, slots))
    if options.wants("sampler/generate"):
        out.append(Program(
            "sampler/generate", sampler._decode_jit,
            (rollout_params, prompt_tokens, lengths, jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=on_rollout),
             jax.ShapeDtypeStruct((), jnp.int32, sharding=on_rollout)),
            rollout.mesh, sampler.rules,
            kwargs=dict(max_new_tokens=t, temperature=float(rl.temperature), top_k=int(rl.top_k),
                        top_p=float(rl.top_p)),
            model_flops=flops, tokens=padded * t, calls=calls, stream_bytes=stream, detail=rows_note,
            hint=SAMPLER_HINT, resident_bytes=during_rollout))
    if needs_hidden and options.wants("sampler/pooled"):
        completions = jax.ShapeDtypeStruct((padded, t), jnp.int32, sharding=sampler.row_sharding((padded, t)))
        mask = jax.ShapeDtypeStruct((padded, t), jnp.float32, sharding=sampler.row_sharding((padded, t)))
        out.append(Program("sampler/pooled", sampler._pooled_jit, (rollout_params, prompt_tokens, completions,
                                                                   lengths, mask),
                           rollout.mesh, sampler.rules, model_flops=padded * slots * forward_flops_per_token(m, slots),
                           tokens=padded * slots, calls=calls, detail=f"{padded} rows x {slots} tokens",
                           hint=SAMPLER_HINT, resident_bytes=during_rollout))

    # the log-prob passes and the update, on the training mesh (the rollout copy dropped before them; the
    # rollout's arrays are on the host)
    multiple = _batch_shards(trainer.mesh, trainer.rules)
    attention = trainer.attention

    def rollout_batch(rows: int) -> dict:
        return {"prompt_tokens": ((rows, p), jnp.int32), "tokens": ((rows, t), jnp.int32),
                "prompt_lengths": ((rows,), jnp.int32), "mask": ((rows, t), jnp.float32)}

    behaviour = jax.jit(behaviour_fn(trainer.graphdef, attention, critic))  # the learner's _behaviour
    rows, count = logprob_micro_rows(n, slots, micro_batch_tokens, multiple)
    pass_flops = rows * slots * forward_flops_per_token(m, slots)
    pass_note = f"{count} micro-batch{'es' if count > 1 else ''} of {rows} rows x {slots} tokens"
    with_behaviour = needs_behaviour_pass(rl, critic is not None, reference is not None)
    if with_behaviour and options.wants("rl/logprobs"):
        out.append(Program("rl/logprobs", behaviour, (trainer.params, trainer.batch(rollout_batch(rows))),
                           trainer.mesh, trainer.rules, model_flops=pass_flops, tokens=rows * slots, calls=count,
                           detail=pass_note, hint=LOGPROB_HINT,
                           resident_bytes=state_bytes - params_bytes + reference_bytes))
    if reference is not None and options.wants("rl/ref_logprobs"):
        out.append(Program("rl/ref_logprobs", behaviour, (reference, trainer.batch(rollout_batch(rows))),
                           trainer.mesh, trainer.rules, model_flops=pass_flops, tokens=rows * slots, calls=count,
                           detail=pass_note, hint=LOGPROB_HINT, resident_bytes=state_bytes))
    if options.wants("rl/update"):
        rows, count = update_micro_rows(config, n, slots, micro_batch_tokens, multiple)
        spec = rollout_batch(rows * count)
        extra = (["old_logp"] if with_behaviour else []) + (["ref_logp"] if reference is not None else []) + \
            (["old_values", "returns"] if critic is not None else []) + ["advantages"]
        spec.update({name: ((rows * count, t), jnp.float32) for name in extra})
        per_update = int(rl.num_iterations) * int(rl.mini_batches)
        program = train_program(
            "rl/update", trainer, spec, flops_per_token=training_flops_per_token(m, slots),
            fn=trainer.train_step(count), hint=RL_UPDATE_HINT, calls=per_update,
            detail=f"{n // int(rl.mini_batches)} rollouts in {count} micro-batch{'es' if count > 1 else ''} of {rows} "
                   f"rows x {slots} tokens, rl.micro_batch_tokens {micro_batch_tokens}")
        program.tokens = rows * count * slots
        program.model_flops = training_flops_per_token(m, slots) * program.tokens
        program.resident_bytes = reference_bytes
        out.append(program)
    return out


def register_rm_tasks() -> None:
    """Every task in shared.rm.RM_TASKS (projects add theirs, e.g. dir_debias/rm) compiles as the rm task."""
    for task in _rm_tasks():
        register_steps(task)(rm_steps)
