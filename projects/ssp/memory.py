"""Compiled memory of one SSP RL point's big device programs, from XLA's memory analysis (nothing is run):

    python -m projects.ssp.memory [--config=experiments/ssp/selfplay.py:min] [--rows=384] [--seq=1056]
        [--turns=320:1024:128,32:1088:1024] [--config.KEY=VALUE ...]

  update        one optimizer step of the RL update (the Trainer's jitted step with the RL loss) over `rows`
                episodes of `seq` tokens (prompt bucket 32 + token bucket 1024: <= 6 turns of <= 40 tokens and
                <= 5 search results), in the micro-batches the learner picks from rl.micro_batch_tokens;
  ref_logprobs  one micro-batch of the reference's log-prob pass (4 x rl.micro_batch_tokens, forward only);
  turn          one turn program of the episode sampler (shared/agent/episodes.py) per ROWS:SLOTS:CHUNK of
                --turns: a context chunk of CHUNK tokens written into the KV cache of ROWS rows x SLOTS slots,
                then <= agent.max_turn_tokens decode steps. Defaults: the solver's 320 rows (B 64 x G 5, one call
                with rl.rollout_max_rows = 320; the evaluation's calls too) with a search result (<= 116 tokens:
                the 128 chunk), and the RAG reader's call of ssp.reader_rows = 32 rows with its one long prompt
                (up to ~26 documents: the 1,024 chunk) in its 1,088 slots.
Per program: argument, output and temp bytes (XLA's own scratch: activations, the attention's scores, logits)
and their sum less the donated arguments, i.e. what the program needs while it runs. On the CPU (2 cores are
enough: it compiles, it does not run) the update's attention is the Pallas flash kernel "splash", interpreted
(unless --config.model.attention says otherwise): like the GPU's cuDNN attention it never holds the
[rows, heads, seq, seq] scores that "xla" materialises. The turn program uses "xla" attention on every backend
(its KV cache has holes), as a run does. Not run on a GPU yet: XLA's GPU compiler may fuse differently.
"""
from __future__ import annotations

import sys

GIB = 2 ** 30


def _flags(argv):
    flags = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a and
                 not a.startswith("--config."))
    overrides = [a[len("--config."):] for a in argv if a.startswith("--config.")]
    return flags, overrides


def _analysis(compiled) -> dict:
    m = compiled.memory_analysis()
    out = {"argument": m.argument_size_in_bytes, "output": m.output_size_in_bytes, "temp": m.temp_size_in_bytes,
           "alias": m.alias_size_in_bytes}
    out["needed"] = out["argument"] + out["output"] + out["temp"] - out["alias"]
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    flags, overrides = _flags(argv)
    import os

    import jax
    import jax.numpy as jnp
    import numpy as np

    from shared.config import load_config

    config = load_config(flags.get("config", "experiments/ssp/selfplay.py:min"), overrides)
    if jax.default_backend() == "cpu":
        config.mesh.preset = "cpu_1"
        if not any(o.startswith("model.attention=") for o in overrides):
            config.model.attention = "splash"
    rows, seq = int(flags.get("rows", 384)), int(flags.get("seq", 1056))
    turns = [tuple(int(x) for x in t.split(":")) for t in flags.get("turns", "320:1024:128,32:1088:1024").split(",")]
    prompt = 32
    from shared.agent.episodes import EpisodeSampler
    from shared.rl import budget
    from shared.rl.learner import _bytes_per_device, behaviour_fn, logprob_micro_rows, rl_loss_fn, update_micro_rows
    from shared.train import Trainer

    workdir = flags.get("workdir", "/tmp/ssp_memory_probe")
    os.makedirs(workdir, exist_ok=True)
    trainer = Trainer(config, workdir, loss_fn_factory=lambda attention: rl_loss_fn(config, attention, None))
    m = config.model
    tokens = budget.micro_batch_tokens(config, _bytes_per_device(trainer.params))
    micro, count = update_micro_rows(config, rows, seq, tokens, 1)
    n = micro * count
    t = seq - prompt
    spec = {"prompt_tokens": ((n, prompt), jnp.int32), "tokens": ((n, t), jnp.int32),
            "prompt_lengths": ((n,), jnp.int32), "mask": ((n, t), jnp.float32),
            "advantages": ((n, t), jnp.float32)}
    if float(config.rl.kl_coef) > 0:
        spec["ref_logp"] = ((n, t), jnp.float32)
    batch = {k: jax.ShapeDtypeStruct(s, d) for k, (s, d) in spec.items()}
    state = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), trainer.state)
    print(f"[memory] backend {jax.default_backend()}, attention {trainer.attention}, model {m.n_layers} x "
          f"{m.d_model} ({m.dtype}, remat {m.remat}), vocab {m.vocab_size}", flush=True)
    report = {}
    step = trainer.train_step(count)
    report["update"] = _analysis(step.lower(state, batch).compile())
    print(f"[memory] update: {rows} rows x {seq} tokens, rl.micro_batch_tokens {tokens} -> {count} micro-batches "
          f"of {micro} rows", flush=True)
    params = jax.eval_shape(lambda p: jax.tree.map(   # the compute-dtype copy: the reference's, the rollout's
        lambda x: x.astype(jnp.dtype(m.dtype)) if jnp.issubdtype(x.dtype, jnp.floating) and x.ndim >= 2 else x, p),
        trainer.params)
    lp_micro, lp_count = logprob_micro_rows(rows, seq, tokens, 1)
    lp_batch = {k: jax.ShapeDtypeStruct((lp_micro,) + v.shape[1:], v.dtype) for k, v in batch.items()
                if k in ("prompt_tokens", "tokens", "prompt_lengths", "mask")}
    report["ref_logprobs"] = _analysis(jax.jit(behaviour_fn(trainer.graphdef, trainer.attention)).lower(
        params, lp_batch).compile())
    print(f"[memory] ref_logprobs: the reference's log-prob pass in {lp_count} micro-batches of {lp_micro} rows",
          flush=True)
    agent = config.agent
    sampler = EpisodeSampler(trainer.graphdef, m, eos_id=1, pad_id=0, tokenizer=None, mesh=trainer.mesh,
                             rules=trainer.rules)
    s = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731
    from shared import sharding as sh
    for turn_rows, slots, chunk in turns:
        cache = jax.eval_shape(lambda: sampler._new_cache(rows=turn_rows, slots=slots))
        args = (params, cache, s((turn_rows, slots), jnp.bool_), s((turn_rows, chunk), jnp.int32),
                s((turn_rows, chunk), jnp.int32), s((), jnp.int32), s((turn_rows,), jnp.int32),
                s((turn_rows,), jnp.bool_), s((1, 3), jnp.int32), jax.eval_shape(lambda: jax.random.key(0)),
                s((), jnp.int32))
        with sh.use_mesh(trainer.mesh, trainer.rules):
            lowered = sampler._turn_jit.lower(*args, max_new_tokens=int(agent.max_turn_tokens), temperature=1.0,
                                              top_k=0, top_p=1.0)
        name = f"turn {turn_rows}x{slots}/{chunk}"
        report[name] = _analysis(lowered.compile())
        cache_bytes = 2 * int(np.prod(cache["k"].shape)) * jnp.dtype(cache["k"].dtype).itemsize
        print(f"[memory] {name}: {turn_rows} rows x {slots} slots (KV cache {cache_bytes / GIB:.2f} GiB), chunk "
              f"{chunk}, {agent.max_turn_tokens} new tokens", flush=True)
    state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(trainer.state))
    print(f"[memory] training state (fp32 params + AdamW) {state_bytes / GIB:.2f} GiB", flush=True)
    for name, r in report.items():
        print(f"[memory] {name:20s} " + "  ".join(f"{k} {v / GIB:.2f}" for k, v in r.items()) + " GiB", flush=True)
    trainer.close() if hasattr(trainer, "close") else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
