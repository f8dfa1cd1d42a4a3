"""Sampler decode tokens/s against the bandwidth floor and HF `generate`; GRPO step wall-time breakdown.

    python -m bench.decode --shapes=125m --batches=1,256 --out=runs/bench/decode_125m.json
    python -m bench.decode --shapes=qwen0.5b --batches=1,256 --peers=hf,hf_static --out=runs/bench/decode_qwen.json
    python -m bench.decode --grpo --skip_decode --grpo_shape=125m --out=runs/bench/grpo_125m.json
    python -m bench.decode --shapes=tiny --grpo                # CPU plumbing check (seconds; D64 L2 V512)

Decode protocol (design/perf_anchors.md sections 4 and 6b, issue 4):
- Random-init model of a bench.train_mfu shape, bf16 compute (model.dtype = bfloat16). `--param_dtypes` lists the
  dtypes of the parameters handed to the sampler: bfloat16 (the same fp32 init cast once: what the floor and HF
  use) and float32 (what RLLearner passes today: the trainer's fp32 master weights, cast to bf16 inside every
  decode step). The first one listed is "ours" in the summary table.
- Same random prompts (ids 1..V-1, all `--prompt_len` long: one prompt bucket, no padding) on every side,
  greedy, `--new_tokens` new tokens with EOS disabled (ours: Sampler(eos_id=-1), which no token equals; HF:
  min_new_tokens = max_new_tokens).
- Per (shape, batch, implementation) one subprocess (bench.train_mfu.Runner). One warm-up call (compile), then the
  median of `--calls` timed calls. Ours: `Sampler.generate` (host prompts in, numpy rollout out: what a rollout
  costs); also, in the JSON, the jitted prefill+decode function alone on device arrays (`device_s`) and a
  prefill-only function mirroring the sampler's prefill (`prefill_s`), giving the decode-only time per step
  (device_s - prefill_s) / (new_tokens - 1). HF: `model.generate` + torch.cuda.synchronize.
- tokens/s = batch * new_tokens / call time (prefill included, on both sides).
- Floors (section 4): static (the sampler's KV buffer has S_max = prompt + new tokens slots and a dense step reads
  all of them): t_step = max(bytes/BW, flops/PEAK) with bytes = 2*(P_layers + V*D) + B*S_max*2*L*Hkv*Dh*2 and
  flops = 2*B*(P_layers + V*D) + 4*B*S_max*L*Hq*Dh; S_t (the same with each step's real context prompt + t + 1:
  what a length-aware kernel, ours, reads); end to end = the prompt pass's floor (2*B*P*P_layers FLOPs + the LM
  head on the last position + causal attention, or its bytes) + the S_t steps: the bound on a whole call, which
  is what the measured tokens/s (prefill included) is set against, as section 4's worked check does for vLLM.
  BW = 3.0 TB/s (measured copy) and PEAK = 790 TFLOP/s (measured matmul) on an H100 by default; a first worker
  measures this device's copy / read bandwidth and matmul rate for the record (`--floor_limits=measured` uses
  them). Target (issue 4): >= 40 % of the floor at batch 256.

GRPO protocol (`--grpo`): the rl task's RLLearner (shared/rl/learner.py) for a random-init policy of
`--grpo_shape` (fp32 master weights, bf16 compute, byte tokenizer, rl/arithmetic prompts, reward = the task
checker, B prompts x G samples, temperature 1, max_new_tokens), kl_coef > 0 so a reference forward runs. Each
step calls learner.collect / build_batch / update and times them as RLLearner.fit does (perf/rollout_and_reward_s,
perf/ref_logprob_s (behaviour + reference log-prob forwards), perf/update_s, perf/step_s); the first
`--grpo_warmup` steps are excluded (two by default: the update step compiles at step 1 and again at step 2, because
the Trainer's initial optimizer-state counters are not placed on the mesh the way the step's outputs are), and the
mean of the next `--grpo_steps` is reported.

The parent process imports neither jax nor torch. Results go to --out (JSON, with the hardware) and --out with
.md after every worker.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from bench.train_mfu import (RESULT_MARKER, SHAPES, WORKER_ENV, Runner, _version, csv_list, fmt_pct, fmt_tok,
                             hardware_record, is_oom, markdown_table, model_fields, one_line, write_outputs)

PEERS = ("hf", "hf_static")   # HF generate with its default (dynamic) cache, eager; with a static cache (compiled)
PARAM_DTYPES = ("bfloat16", "float32")
# The tiny shape is a CPU plumbing check: smaller work unless the flags say otherwise.
TINY_DEFAULTS = {"batches": "1,16", "prompt_len": 32, "new_tokens": 32, "grpo_prompts": 4, "grpo_group": 4,
                 "grpo_new_tokens": 16, "grpo_warmup": 2, "grpo_steps": 2}
DEFAULTS = {"batches": "1,256", "prompt_len": 128, "new_tokens": 256, "grpo_prompts": 32, "grpo_group": 8,
            "grpo_new_tokens": 64, "grpo_warmup": 2, "grpo_steps": 5}


# ============================================================================ the bandwidth floor (section 4)


def layer_params(m: dict) -> int:
    """Non-embedding parameters of all layers (weights, q/k/v biases, the two norms), as perf_anchors' appendix."""
    d, h, kv, hd = m["d_model"], m["n_heads"], m["n_kv_heads"], m["head_dim"]
    per_layer = d * (h + 2 * kv) * hd + h * hd * d + 3 * d * m["d_ff"] + 2 * d
    if m.get("qkv_bias"):
        per_layer += (h + 2 * kv) * hd
    return m["n_layers"] * per_layer


def decode_step_floor(m: dict, batch: int, context: int, bandwidth: float, peak: float) -> dict:
    """Lower bound on one decode step over `batch` rows attending to `context` cache slots: bf16 weights (the
    tied embedding read once, as the LM head) + the K and V caches, against BW; matmul FLOPs against PEAK."""
    weights = layer_params(m) + m["vocab_size"] * m["d_model"]
    bytes_step = 2 * weights + batch * context * 2 * m["n_layers"] * m["n_kv_heads"] * m["head_dim"] * 2
    flops_step = 2 * batch * weights + 4 * batch * context * m["n_layers"] * m["n_heads"] * m["head_dim"]
    step_s = max(bytes_step / bandwidth, flops_step / peak)
    return {"step_s": step_s, "bytes": bytes_step, "flops": flops_step, "tokens_per_s": batch / step_s,
            "bound": "memory" if bytes_step / bandwidth >= flops_step / peak else "compute"}


def prefill_floor(m: dict, batch: int, prompt_len: int, bandwidth: float, peak: float) -> float:
    """Lower bound (seconds) on the prompt pass up to the first token: every prompt token through the layers,
    causal attention over the prompt, the LM head on the last position only; bf16 weights + the KV written."""
    tokens = batch * prompt_len
    flops = (2 * tokens * layer_params(m) + 2 * batch * m["vocab_size"] * m["d_model"]
             + 2 * batch * prompt_len * prompt_len * m["n_layers"] * m["n_heads"] * m["head_dim"])  # 4*B*P^2/2*...
    bytes_ = (2 * (layer_params(m) + m["vocab_size"] * m["d_model"])
              + tokens * 2 * m["n_layers"] * m["n_kv_heads"] * m["head_dim"] * 2)
    return max(bytes_ / bandwidth, flops / peak)


def decode_floor(shape: str, batch: int, prompt_len: int, new_tokens: int, bandwidth: float, peak: float) -> dict:
    """Static-cache floor (every step reads S_max = prompt + new slots), the floor with the real context
    S_t = prompt + t + 1 of step t (what a length-aware kernel can reach), and the end-to-end floor of a whole
    call (the prompt pass + the S_t steps: what the measured tokens/s, prefill included, is set against, as in
    perf_anchors section 4's worked check)."""
    m = model_fields(shape)
    static = decode_step_floor(m, batch, prompt_len + new_tokens, bandwidth, peak)
    growing_s = sum(decode_step_floor(m, batch, prompt_len + t + 1, bandwidth, peak)["step_s"]
                    for t in range(new_tokens))
    prefill_s = prefill_floor(m, batch, prompt_len, bandwidth, peak)
    return {"context": prompt_len + new_tokens, "step_s": static["step_s"], "tokens_per_s": static["tokens_per_s"],
            "bytes_per_step": static["bytes"], "flops_per_step": static["flops"], "bound": static["bound"],
            "growing_context_tokens_per_s": batch * new_tokens / growing_s,
            "growing_step_s": growing_s / new_tokens, "prefill_s": prefill_s,
            "end_to_end_tokens_per_s": batch * new_tokens / (prefill_s + growing_s),
            "bandwidth": bandwidth, "peak_flops": peak}


def floor_of(entry: dict) -> dict:
    """The entry's floor, completed from its own constants when it was written before a field existed."""
    floor = entry["floor"]
    if "end_to_end_tokens_per_s" not in floor:
        floor = dict(floor, **decode_floor(entry["shape"], entry["batch"], entry["prompt_len"], entry["new_tokens"],
                                          floor["bandwidth"], floor["peak_flops"]))
    return floor


# ============================================================================ shared worker helpers


def synthetic_prompts(vocab: int, batch: int, prompt_len: int, seed: int = 0):
    """Random prompt ids in [1, vocab) (0 is the pad id on both sides). Same seed -> same prompts everywhere."""
    import numpy as np

    return np.random.default_rng(seed).integers(1, vocab, size=(batch, prompt_len), dtype=np.int64)


def timed_calls(fn, calls: int) -> tuple[float, list[float]]:
    """(first call seconds, [seconds of each of `calls` further calls]); fn must block until its work is done."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return first, times


def jax_info() -> dict:
    import jax

    info: dict[str, Any] = {"device": jax.devices()[0].device_kind, "platform": jax.default_backend(),
                            "jax": jax.__version__, "jaxlib": _version("jaxlib"), "flax": _version("flax")}
    try:
        from jax._src.lib import cuda_versions  # private; present on CUDA builds only
        info["jax_cudnn"] = cuda_versions.cudnn_get_version() if cuda_versions else None
    except Exception:  # noqa: BLE001  (best effort: a version number for the record)
        pass
    return info


def run_limits(spec: dict) -> dict:
    """This device's copy bandwidth (read + write of a large bf16 array) and bf16 matmul rate: the two constants
    of the floor, measured here the way perf_anchors measured its H100 ones. Best of `repeats` timed calls."""
    import jax
    import jax.numpy as jnp

    info = jax_info()
    try:
        n = int(spec["copy_bytes"]) // 2
        x = jnp.ones((n,), jnp.bfloat16)
        copy = jax.jit(lambda a: a + 1)   # one read + one write of n elements
        read = jax.jit(lambda a: jnp.sum(a, dtype=jnp.float32))   # one read of n elements
        _, copy_s = timed_calls(lambda: jax.block_until_ready(copy(x)), spec["repeats"])
        _, read_s = timed_calls(lambda: jax.block_until_ready(read(x)), spec["repeats"])
        x = None  # frees the array before the GEMMs
        k = int(spec["matmul_n"])
        a = jnp.ones((k, k), jnp.bfloat16)
        chain = 8                         # several GEMMs per call so dispatch does not count
        matmuls = jax.jit(lambda a: [a @ (a + i) for i in range(chain)])
        _, mm_s = timed_calls(lambda: jax.block_until_ready(matmuls(a)), spec["repeats"])
        info.update(status="ok", copy_bytes=4 * n, bandwidth=4 * n / min(copy_s), copy_s=copy_s,
                    read_bandwidth=2 * n / min(read_s), read_s=read_s,
                    matmul_n=k, peak_flops=chain * 2 * k ** 3 / min(mm_s), matmul_s=mm_s)
    except Exception as e:  # noqa: BLE001  (reported as the worker's result)
        info.update(status="error", error=one_line(e))
    return info


def op_profile(fn, top: int) -> dict:
    """GPU busy time and the `top` XLA ops by GPU time over one traced call of fn (which must block)."""
    import jax

    from bench.profile_step import gpu_op_times

    trace_dir = tempfile.mkdtemp(prefix="decode_trace_")
    with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
        fn()
    totals = gpu_op_times(trace_dir)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return {"busy_ms": sum(totals.values()) / 1e3, "top_ops_ms": [[name[:120], us / 1e3] for name, us in ranked]}


def use_compile_cache(spec: dict) -> None:
    import jax

    if spec.get("compile_cache"):
        jax.config.update("jax_compilation_cache_dir", spec["compile_cache"])


def decode_model_config(shape: str, max_len: int):
    from shared.config.base import model_config

    cfg = model_config()
    for key, value in model_fields(shape).items():
        cfg[key] = value
    cfg.tie_embeddings = True
    cfg.mlp = "swiglu"
    cfg.remat = "none"            # no effect with a KV cache; set for clarity
    cfg.attention = "xla"         # the sampler's cache path is XLA attention whatever this says
    cfg.dtype = "bfloat16"
    cfg.param_dtype = "float32"
    cfg.max_seq_len = max_len
    return cfg


# ============================================================================ worker: ours (JAX sampler)


def run_ours(spec: dict) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    use_compile_cache(spec)
    import shared.model  # noqa: F401  (registrations)
    from shared.model import build_model
    from shared.rl.sampler import Sampler, SamplingParams

    info = jax_info()
    b, p, t = spec["batch"], spec["prompt_len"], spec["new_tokens"]
    try:
        cfg = decode_model_config(spec["shape"], p + t)
        graphdef = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]
        params32 = jax.jit(lambda: nnx.split(build_model(cfg, seed=0))[1])()  # jit: eager scanned init is slow
        info["params"] = int(sum(x.size for x in jax.tree.leaves(params32)))
        prompts_np = synthetic_prompts(cfg.vocab_size, b, p).astype(np.int32)
        prompts = prompts_np.tolist()
        sampling = SamplingParams(max_new_tokens=t, temperature=0.0, n=1, prompt_buckets=(p,))
        key = jax.random.key(0)
        prompt_dev = jnp.asarray(prompts_np)
        lengths_dev = jnp.full((b,), p, jnp.int32)

        runs = {}
        for dtype in spec["param_dtypes"]:
            params = params32 if dtype == "float32" else jax.tree.map(lambda x: x.astype(jnp.dtype(dtype)), params32)
            # eos_id=-1: no sampled token equals it, so every row decodes all t tokens (EOS disabled).
            prefill_attention = spec.get("prefill_attention") or "auto"
            if prefill_attention == "auto":
                prefill_attention = "cudnn" if jax.default_backend() == "gpu" else "xla"
            sampler = Sampler(graphdef, cfg, eos_id=-1, pad_id=0, attention=prefill_attention,
                              layer_loop=spec.get("layer_loop") or "python",
                              decode_attention=spec.get("decode_attention") or "auto")
            rollout = None
            # the sampler's own prompt pass up to its first sampled token (timed alone: prefill_s)
            prefill = jax.jit(lambda params, prompts, lengths: sampler._prefill(
                params, prompts, lengths, key, max_new_tokens=t, temperature=0.0, top_k=0, top_p=1.0)[:2])

            def generate():
                nonlocal rollout
                rollout = sampler.generate(params, prompts, sampling, key)  # returns numpy: already synced

            def device_only():
                out = sampler._decode_jit(params, prompt_dev, lengths_dev, key, max_new_tokens=t, temperature=0.0,
                                          top_k=0, top_p=1.0)
                jax.block_until_ready(out)

            if spec.get("dump_hlo"):  # optimized HLO of the whole prefill + decode loop, to check copies/layouts
                os.makedirs(spec["dump_hlo"], exist_ok=True)
                lowered = sampler._decode_jit.lower(params, prompt_dev, lengths_dev, key, max_new_tokens=t,
                                                    temperature=0.0, top_k=0, top_p=1.0)
                path = os.path.join(spec["dump_hlo"], f"{spec['shape']}_b{b}_{dtype}_decode.hlo.txt")
                with open(path, "w") as f:
                    f.write(lowered.compile().as_text())
            first_s, gen_times = timed_calls(generate, spec["calls"])
            run_prefill = lambda: jax.block_until_ready(prefill(params, prompt_dev, lengths_dev))  # noqa: E731
            _, device_times = timed_calls(device_only, spec["calls"])
            prefill_first_s, prefill_times = timed_calls(run_prefill, spec["calls"])
            # after the timings: a traced call leaves the profiler's hooks behind, which slowed the untraced
            # calls after it (measured: decode-only 2.12 vs 1.61 ms/step with the loop as one CUDA graph)
            if spec.get("profile"):  # GPU time per XLA op over one traced device-only call, and one prefill
                info.setdefault("profile", {})[dtype] = op_profile(device_only, int(spec["profile"]))
                info.setdefault("prefill_profile", {})[dtype] = op_profile(run_prefill, int(spec["profile"]))
            if sampler.last_decode_steps != t or int(rollout.lengths.min()) != t:
                raise RuntimeError(f"decode stopped early: {sampler.last_decode_steps} steps, min length "
                                   f"{int(rollout.lengths.min())} (expected {t}: EOS should be disabled)")
            call_s = statistics.median(gen_times)
            device_s, prefill_s = statistics.median(device_times), statistics.median(prefill_times)
            runs[dtype] = {
                "status": "ok", "call_s": call_s, "call_s_all": gen_times, "first_call_s": first_s,
                "tokens_per_s": b * t / call_s, "step_s": call_s / t,
                "device_s": device_s, "device_s_all": device_times, "prefill_s": prefill_s,
                "prefill_first_call_s": prefill_first_s,
                "decode_step_s": max(device_s - prefill_s, 0.0) / max(t - 1, 1),
                "decode_traces": sampler.trace_counts["decode"],  # 1 = no recompiles across the calls
                "decode_attention": sampler.decode_attention, "prefill_attention": prefill_attention,
                "first_tokens": rollout.tokens[0, :8].tolist(),
            }
        info["runs"] = runs
        stats = jax.devices()[0].memory_stats() or {}
        info["peak_mem_bytes"] = stats.get("peak_bytes_in_use")
        info["status"] = "ok"
    except Exception as e:  # noqa: BLE001  (report OOM / errors per measurement instead of dying)
        info["status"] = "OOM" if is_oom(e) else "error"
        info["error"] = one_line(e)
    return info


# ============================================================================ worker: HF transformers generate


def run_hf(spec: dict) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, Qwen2Config

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    info: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if cuda else (platform.processor() or "cpu"),
                            "platform": "gpu" if cuda else "cpu", "torch": torch.__version__,
                            "transformers": transformers.__version__, "torch_cuda": torch.version.cuda,
                            "torch_cudnn": torch.backends.cudnn.version() if cuda else None}
    torch.manual_seed(0)
    m = model_fields(spec["shape"])
    b, p, t = spec["batch"], spec["prompt_len"], spec["new_tokens"]
    try:
        hf_config = Qwen2Config(
            vocab_size=m["vocab_size"], hidden_size=m["d_model"], intermediate_size=m["d_ff"],
            num_hidden_layers=m["n_layers"], num_attention_heads=m["n_heads"], num_key_value_heads=m["n_kv_heads"],
            max_position_embeddings=p + t, tie_word_embeddings=True, rms_norm_eps=1e-6, use_cache=True)
        model = AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa", dtype=torch.bfloat16)
        model.to(dev).eval()
        info["attention"] = model.config._attn_implementation
        info["params"] = int(sum(x.numel() for x in model.parameters()))
        input_ids = torch.from_numpy(synthetic_prompts(m["vocab_size"], b, p)).to(dev)
        kwargs = dict(attention_mask=torch.ones_like(input_ids), do_sample=False, max_new_tokens=t,
                      min_new_tokens=t, pad_token_id=0)
        if spec["impl"] == "hf_static":
            kwargs["cache_implementation"] = "static"  # on CUDA, generate then compiles the decode forward
        info["cache"] = kwargs.get("cache_implementation", "dynamic")
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        output = None

        def generate():
            nonlocal output
            with torch.inference_mode():
                output = model.generate(input_ids, **kwargs)
            sync()

        first_s, times = timed_calls(generate, spec["calls"])
        if tuple(output.shape) != (b, p + t):
            raise RuntimeError(f"HF generate returned shape {tuple(output.shape)}, expected {(b, p + t)}")
        call_s = statistics.median(times)
        info["runs"] = {"hf": {"status": "ok", "call_s": call_s, "call_s_all": times, "first_call_s": first_s,
                               "tokens_per_s": b * t / call_s, "step_s": call_s / t,
                               "first_tokens": output[0, p:p + 8].tolist()}}
        info["peak_mem_bytes"] = torch.cuda.max_memory_allocated() if cuda else None
        info["status"] = "ok"
    except Exception as e:  # noqa: BLE001
        info["status"] = "OOM" if is_oom(e) else "error"
        info["error"] = one_line(e)
    return info


# ============================================================================ worker: GRPO step breakdown


def grpo_config(spec: dict, platform_name: str):
    import ml_collections
    from shared.config import base_config

    c = base_config()
    c.task = "rl"
    for key, value in model_fields(spec["shape"]).items():
        c.model[key] = value
    c.model.tie_embeddings = True
    c.model.mlp = "swiglu"
    c.model.remat = spec["remat"]
    c.model.dtype = "bfloat16"
    c.model.param_dtype = "float32"
    c.data.tokenizer = "byte"     # ids < 259 fit every shape's vocab
    c.mesh.preset = {"gpu": "gpu_1"}.get(platform_name, "cpu_1")
    c.rl.task = "rl/arithmetic"
    c.rl.task_options = ml_collections.ConfigDict({"ops": "+-*"})
    c.rl.n_train = 2000
    c.rl.rewards = [("task", 1.0)]
    c.rl.prompts_per_step = spec["prompts"]
    c.rl.group_size = spec["group"]
    c.rl.max_new_tokens = spec["new_tokens"]
    c.rl.temperature = 1.0
    c.rl.kl_coef = spec["kl_coef"]
    c.rl.advantage = "grpo"
    c.rl.policy_loss = "ppo-clip"
    c.train.steps = 1_000_000
    c.train.progress = False
    c.train.async_checkpoint = False
    c.optim.lr = 1e-6             # the value does not change the speed
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 1
    return c


def run_grpo(spec: dict) -> dict:
    import jax
    import numpy as np

    use_compile_cache(spec)
    import shared.builtin  # noqa: F401  (rewards, tasks, tokenizers; shared.data needs grain)
    from shared.data import build_tokenizer
    from shared.rewards import RewardManager
    from shared.rl.learner import RLLearner
    from shared.rl.task import reward_specs
    from shared.rl.tasks import load_task

    info = jax_info()
    workdir = tempfile.mkdtemp(prefix="bench_decode_grpo_")
    learner = None
    try:
        config = grpo_config(spec, jax.default_backend())
        tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
        train = load_task(config.rl.task, "train", int(config.rl.n_train), int(config.seed),
                          **dict(config.rl.task_options))
        learner = RLLearner(config, workdir, tokenizer, train, {}, RewardManager(reward_specs(config)))
        info["attention"] = learner.trainer.attention
        info["params"] = int(sum(x.size for x in jax.tree.leaves(learner.trainer.state["params"])))
        steps = []
        for step in range(1, spec["warmup"] + spec["steps"] + 1):
            key = jax.random.fold_in(learner.rng, step)  # as RLLearner.fit
            t0 = time.perf_counter()
            scored, _ = learner.collect(jax.random.fold_in(key, 0))
            t1 = time.perf_counter()
            batch, times = learner.build_batch(scored)
            t2 = time.perf_counter()
            update = learner.update(batch, jax.random.fold_in(key, 1))
            t3 = time.perf_counter()
            r = scored.rollout
            steps.append({"perf/rollout_and_reward_s": t1 - t0, "perf/update_s": t3 - t2, "perf/step_s": t3 - t0,
                          "perf/ref_logprob_s": times["perf/ref_logprob_s"], "build_batch_s": t2 - t1,
                          "generated_tokens": int(r.lengths.sum()), "rows": int(r.tokens.shape[0]),
                          "prompt_bucket": int(r.prompt_tokens.shape[1]),
                          "response_length": float(r.lengths.mean()), "reward_mean": float(scored.rewards.mean()),
                          "loss": update.get("loss")})
        timed = steps[spec["warmup"]:]
        mean = {k: float(np.mean([s[k] for s in timed]))
                for k in ("perf/rollout_and_reward_s", "perf/ref_logprob_s", "perf/update_s", "perf/step_s",
                          "build_batch_s", "generated_tokens", "response_length")}
        rows, bucket = timed[-1]["rows"], timed[-1]["prompt_bucket"]
        info.update(mean)
        info["rollout_tokens_per_s"] = mean["generated_tokens"] / mean["perf/rollout_and_reward_s"]
        info["rollout_padded_tokens_per_s"] = rows * spec["new_tokens"] / mean["perf/rollout_and_reward_s"]
        info["update_tokens_per_s"] = rows * (bucket + spec["new_tokens"]) / mean["perf/update_s"]  # padded rows
        info["rows"], info["prompt_bucket"] = rows, bucket
        info["steps"] = steps
        info["decode_traces"] = learner.sampler.trace_counts["decode"]
        stats = jax.devices()[0].memory_stats() or {}
        info["peak_mem_bytes"] = stats.get("peak_bytes_in_use")
        info["status"] = "ok"
    except Exception as e:  # noqa: BLE001
        info["status"] = "OOM" if is_oom(e) else "error"
        info["error"] = one_line(e)
    finally:
        if learner is not None:
            learner.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return info


def worker_main(kind: str, spec_json: str) -> int:
    spec = json.loads(spec_json)
    if kind == "limits":
        result = run_limits(spec)
    elif kind == "ours":
        result = run_ours(spec)
    elif kind == "grpo":
        result = run_grpo(spec)
    else:
        result = run_hf(dict(spec, impl=kind))
    result["env"] = {name: os.environ[name] for name in WORKER_ENV if name in os.environ}
    print(RESULT_MARKER + json.dumps(result, default=str), flush=True)
    return 0


# ============================================================================ parent: tables


def ok_run(result: dict | None, key: str) -> dict | None:
    """The measurement `key` (a param dtype for ours, "hf" for a peer) of a worker result, if it succeeded."""
    if not result or result.get("status") != "ok":
        return None
    run = result.get("runs", {}).get(key)
    return run if run and run.get("status") == "ok" else None


def status_of(result: dict | None) -> str:
    return "-" if result is None else result.get("status", "?")


def ratio_cell(a: dict | None, b: dict | None) -> str:
    return f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}x" if a and b else "-"


def decode_summary(entries: list[dict], param_dtypes: list[str], peers: list[str]) -> str:
    primary = param_dtypes[0]
    header = ["shape", "batch", "ours tok/s", "ours ms/step", "static floor tok/s", "% of static floor",
              "end-to-end floor tok/s", "% of end-to-end floor", "decode-only % of S_t floor"]
    for peer in peers:
        header += [f"{peer} tok/s", f"ours/{peer}"]
    header += [f"ours ({d} params) tok/s" for d in param_dtypes[1:]]
    rows = []
    for e in entries:
        ours = ok_run(e["results"].get("ours"), primary)
        floor = floor_of(e)
        row = [e["shape"], str(e["batch"]),
               fmt_tok(ours["tokens_per_s"]) if ours else status_of(e["results"].get("ours")),
               f"{1e3 * ours['step_s']:.2f}" if ours else "-", fmt_tok(floor["tokens_per_s"]),
               fmt_pct(ours["tokens_per_s"] / floor["tokens_per_s"]) if ours else "-",
               fmt_tok(floor["end_to_end_tokens_per_s"]),
               fmt_pct(ours["tokens_per_s"] / floor["end_to_end_tokens_per_s"]) if ours else "-",
               fmt_pct(floor["growing_step_s"] / ours["decode_step_s"])
               if ours and ours.get("decode_step_s") else "-"]
        for peer in peers:
            run = ok_run(e["results"].get(peer), "hf")
            row += [fmt_tok(run["tokens_per_s"]) if run else status_of(e["results"].get(peer)), ratio_cell(ours, run)]
        for dtype in param_dtypes[1:]:
            run = ok_run(e["results"].get("ours"), dtype)
            row.append(fmt_tok(run["tokens_per_s"]) if run else "-")
        rows.append(row)
    return markdown_table(header, rows)


def decode_details(entries: list[dict]) -> str:
    header = ["shape", "batch", "impl", "status", "call s", "tok/s", "ms/step", "prefill ms", "prefill floor ms",
              "decode-only ms/step", "static floor ms/step", "% static floor (decode-only)", "S_t floor ms/step",
              "% S_t floor (decode-only)", "% S_t floor (end to end, prefill not in the floor)", "first call s",
              "params M", "error"]
    rows = []
    for e in entries:
        floor = floor_of(e)
        floor_ms = 1e3 * floor["step_s"]
        growing_ms = 1e3 * floor["growing_step_s"]  # mean step of the S_t floor
        for impl, result in e["results"].items():
            runs = result.get("runs") or {"-": {}}
            for key, run in runs.items():
                label = f"ours ({key} params)" if impl == "ours" else impl
                ok = run.get("status") == "ok"
                decode_ms = 1e3 * run["decode_step_s"] if ok and "decode_step_s" in run else None
                rows.append([
                    e["shape"], str(e["batch"]), label, result.get("status", "?"),
                    f"{run['call_s']:.3f}" if ok else "-", fmt_tok(run.get("tokens_per_s")) if ok else "-",
                    f"{1e3 * run['step_s']:.2f}" if ok else "-",
                    f"{1e3 * run['prefill_s']:.1f}" if ok and "prefill_s" in run else "-",
                    f"{1e3 * floor['prefill_s']:.1f}",
                    f"{decode_ms:.3f}" if decode_ms is not None else "-", f"{floor_ms:.3f}",
                    fmt_pct(floor_ms / decode_ms) if decode_ms else "-",
                    f"{growing_ms:.3f}", fmt_pct(growing_ms / decode_ms) if decode_ms else "-",
                    fmt_pct(run["tokens_per_s"] / floor["growing_context_tokens_per_s"]) if ok else "-",
                    f"{run['first_call_s']:.1f}" if ok else "-",
                    f"{result['params'] / 1e6:.1f}" if result.get("params") else "-",
                    (result.get("error") or "")[:160].replace("|", "/")])
    return markdown_table(header, rows)


def limits_line(payload: dict) -> str:
    """Which bandwidth / matmul rate the floors use, and what this device measured."""
    args, limits = payload["args"], payload.get("device_limits")
    measured = ""
    if limits and limits.get("status") == "ok":
        read = (f" ({limits['read_bandwidth'] / 1e12:.3g} TB/s reading only)"
                if limits.get("read_bandwidth") else "")
        measured = (f"This device measured {limits['bandwidth'] / 1e12:.3g} TB/s copy{read} and "
                    f"{limits['peak_flops'] / 1e12:.3g} TFLOP/s bf16 matmul (`run_limits`). ")
    elif limits:
        measured = f"Device limits not measured ({limits.get('status')}: {(limits.get('error') or '')[:120]}). "
    used = payload.get("floor_limits") or {"bandwidth": args["bandwidth_tbps"] * 1e12,
                                           "peak_flops": args["peak_tflops"] * 1e12, "source": "constants"}
    source = ("this device's measured values" if used["source"] == "measured"
              else "the constants given (perf_anchors' measured H100 values by default)")
    return (f"{measured}Floors use {used['bandwidth'] / 1e12:.3g} TB/s and {used['peak_flops'] / 1e12:.3g} "
            f"TFLOP/s: {source}.")


def measured_floor_table(payload: dict) -> str:
    """Ours against the floors at this device's own measured rates (copy, and read-only bandwidth) when the
    headline floors use other numbers: how much of the gap to the constants is the device's."""
    limits, used = payload.get("device_limits") or {}, payload.get("floor_limits") or {}
    if limits.get("status") != "ok" or used.get("source") == "measured" or not payload.get("decode"):
        return ""
    primary = payload["args"]["param_dtypes"][0]
    rates = [("copy", limits["bandwidth"])] + ([("read-only", limits["read_bandwidth"])]
                                                if limits.get("read_bandwidth") else [])
    header = ["shape", "batch", "ours tok/s"]
    for name, bandwidth in rates:
        header += [f"end-to-end floor at {name} {bandwidth / 1e12:.3g} TB/s", "% of it",
                   "decode-only % of S_t floor"]
    rows = []
    for e in payload["decode"]:
        ours = ok_run(e["results"].get("ours"), primary)
        if not ours:
            continue
        row = [e["shape"], str(e["batch"]), fmt_tok(ours["tokens_per_s"])]
        for _, bandwidth in rates:
            floor = decode_floor(e["shape"], e["batch"], e["prompt_len"], e["new_tokens"], bandwidth,
                                 limits["peak_flops"])
            row += [fmt_tok(floor["end_to_end_tokens_per_s"]),
                    fmt_pct(ours["tokens_per_s"] / floor["end_to_end_tokens_per_s"]),
                    fmt_pct(floor["growing_step_s"] / ours["decode_step_s"]) if ours.get("decode_step_s") else "-"]
        rows.append(row)
    if not rows:
        return ""
    return ("The same runs against floors at this device's own measured rates (matmul "
            f"{limits['peak_flops'] / 1e12:.3g} TFLOP/s):\n\n" + markdown_table(header, rows))


def grpo_table(results: list[dict]) -> str:
    header = ["shape", "B x G", "new tokens", "rollout+reward s", "ref logprob s", "update s", "step s",
              "rollout tok/s", "mean response len", "update tok/s (padded)", "warm-up steps s", "status / error"]
    rows = []
    for r in results:
        ok = r.get("status") == "ok"

        def sec(key):
            return f"{r[key]:.3f}" if ok else "-"

        rows.append([r["shape"], f"{r['prompts']} x {r['group']}", str(r["new_tokens"]),
                     sec("perf/rollout_and_reward_s"), sec("perf/ref_logprob_s"), sec("perf/update_s"),
                     sec("perf/step_s"), fmt_tok(r.get("rollout_tokens_per_s")) if ok else "-",
                     f"{r['response_length']:.1f}" if ok else "-",
                     fmt_tok(r.get("update_tokens_per_s")) if ok else "-",
                     ", ".join(f"{s['perf/step_s']:.1f}" for s in r["steps"][:r["warmup"]]) if ok else "-",
                     "ok" if ok else f"{r.get('status')}: {(r.get('error') or '')[:160]}".replace("|", "/")])
    return markdown_table(header, rows)


def render_markdown(payload: dict) -> str:
    hw, args = payload["hardware"], payload["args"]
    lines = ["# Sampler decode throughput and GRPO step breakdown (`python -m bench.decode`)", "",
             f"Device: {hw.get('device', '?')}; jax {hw.get('jax', '?')} (jaxlib {hw.get('jaxlib', '?')}); "
             f"torch {hw.get('torch', '-')}, transformers {hw.get('transformers', '-')}; "
             f"XLA_FLAGS={hw.get('XLA_FLAGS') or '(none)'}", ""]
    if payload.get("decode"):
        lines += [f"Decode: prompt {args['prompt_len']} + {args['new_tokens']} new tokens, greedy, EOS disabled, "
                  f"bf16 compute; ours = `Sampler.generate` with {args['param_dtypes'][0]} params; median of "
                  f"{args['calls']} calls after one warm-up call; tok/s = batch x new tokens / call time (prefill "
                  f"included). Floors (perf_anchors section 4): static = every step reads the whole cache "
                  f"(S_max = prompt + new slots); S_t = each step reads its real context (prompt + tokens so far), "
                  f"what a length-aware kernel can reach; end to end = the prompt pass's floor (its matmul FLOPs) + "
                  f"the S_t steps, the bound on a whole call as in section 4's worked check. Target: >= 40% of the "
                  f"floor at batch 256.", "", limits_line(payload), "",
                  decode_summary(payload["decode"], args["param_dtypes"], args["peers"]), ""]
        measured = measured_floor_table(payload)
        lines += ([measured, ""] if measured else []) + ["Details:", "", decode_details(payload["decode"])]
    if payload.get("grpo"):
        lines += ["", "GRPO step (RLLearner, mean over the timed steps; perf/ref_logprob_s = behaviour + reference "
                      "log-prob forwards; rollout tok/s = generated tokens / rollout_and_reward_s):", "",
                  grpo_table(payload["grpo"])]
    return "\n".join(lines)


# ============================================================================ parent: main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.decode", description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="125m,qwen0.5b", help=f"comma list of: {', '.join(SHAPES)}")
    p.add_argument("--batches", default=None, help=f"comma list of batch sizes (default {DEFAULTS['batches']}; "
                                                   f"tiny: {TINY_DEFAULTS['batches']})")
    p.add_argument("--prompt_len", type=int, default=None, help="prompt tokens (default 128; tiny: 32)")
    p.add_argument("--new_tokens", type=int, default=None, help="generated tokens (default 256; tiny: 32)")
    p.add_argument("--calls", type=int, default=3, help="timed calls after the warm-up call (median reported)")
    p.add_argument("--param_dtypes", default=",".join(PARAM_DTYPES),
                   help="ours: dtypes of the params given to the sampler; the first is the headline")
    p.add_argument("--peers", default="hf", help=f"comma list of: {', '.join(PEERS)} ('' = none)")
    p.add_argument("--skip_decode", action="store_true", help="only the GRPO breakdown (with --grpo)")
    p.add_argument("--layer_loop", default="python", choices=("scan", "python"),
                   help="ours: Sampler(layer_loop=): a Python loop over per-layer caches (what the RL learner uses; "
                        "the fused decode kernels need it), or scanned layers over a stacked cache")
    p.add_argument("--decode_attention", default="auto", choices=("auto", "xla", "pallas"),
                   help="ours: Sampler(decode_attention=): auto = the Pallas kernel on GPU")
    p.add_argument("--prefill_attention", default="auto", choices=("auto", "xla", "cudnn"),
                   help="ours: Sampler(attention=) for the prompt pass: auto = cudnn on GPU")
    p.add_argument("--profile", type=int, default=0,
                   help="ours: trace one device-only decode call and keep this many top GPU ops (0 = off)")
    p.add_argument("--dump_hlo", default="", help="ours: write the optimized HLO of the decode function here")
    p.add_argument("--bandwidth_tbps", type=float, default=3.0, help="floor: HBM bandwidth (measured copy, H100)")
    p.add_argument("--peak_tflops", type=float, default=790.0, help="floor: bf16 matmul peak (measured, H100)")
    p.add_argument("--floor_limits", default="constants", choices=("constants", "measured", "none"),
                   help="a first worker measures this device's copy / read bandwidth and matmul rate (reported); "
                        "the floors use --bandwidth_tbps / --peak_tflops (constants: perf_anchors' H100 values, "
                        "what issue 4's target refers to) or the measured values (measured; the constants if "
                        "the measurement fails); none: no measurement, constants")
    p.add_argument("--limits_copy_mib", type=int, default=None, help="array size of the copy measurement "
                                                                     "(default 2048; tiny: 64)")
    p.add_argument("--grpo", action="store_true", help="also run the GRPO step breakdown")
    p.add_argument("--grpo_shape", default=None, help="GRPO policy shape (default 125m; tiny with --shapes=tiny)")
    p.add_argument("--grpo_prompts", type=int, default=None, help="B prompts per step (default 32; tiny 4)")
    p.add_argument("--grpo_group", type=int, default=None, help="G samples per prompt (default 8; tiny 4)")
    p.add_argument("--grpo_new_tokens", type=int, default=None, help="rl.max_new_tokens (default 64; tiny 16)")
    p.add_argument("--grpo_warmup", type=int, default=None,
                   help="untimed first steps (default 2: the Trainer's update step compiles twice, at steps 1 and 2)")
    p.add_argument("--grpo_steps", type=int, default=None, help="timed steps (default 5; tiny 2)")
    p.add_argument("--grpo_kl_coef", type=float, default=0.04,
                   help="rl.kl_coef (GRPO paper 0.04): > 0 adds the reference forward to perf/ref_logprob_s")
    p.add_argument("--grpo_remat", default="none", help="model.remat of the policy (none | full | dots | dots_all)")
    p.add_argument("--out", default="", help="JSON path; the markdown tables go beside it with .md")
    p.add_argument("--render", default="", help="only rewrite the .md beside this JSON (written by this tool)")
    p.add_argument("--log_dir", default="", help="worker logs (default: <out>_logs or a temp folder)")
    p.add_argument("--worker_timeout_s", type=float, default=600.0)
    p.add_argument("--time_budget_s", type=float, default=0.0,
                   help="total seconds for all workers; workers that would start after it are 'skipped'")
    p.add_argument("--compile_cache", default=os.path.join(tempfile.gettempdir(), "bench_decode_jax_cache"),
                   help="JAX persistent compilation cache folder ('' = off)")
    p.add_argument("--_worker", default="", help=argparse.SUPPRESS)
    p.add_argument("--_spec", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._worker:
        return args
    args.shapes = csv_list(args.shapes)
    for shape in args.shapes:
        model_fields(shape)
    defaults = TINY_DEFAULTS if args.shapes == ["tiny"] else DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.grpo_shape = args.grpo_shape or ("tiny" if args.shapes == ["tiny"] else "125m")
    model_fields(args.grpo_shape)
    try:
        args.batches = [int(x) for x in csv_list(args.batches)]
    except ValueError:
        p.error(f"--batches: expected a comma list of integers, got {args.batches!r}")
    args.peers = csv_list(args.peers)
    args.param_dtypes = csv_list(args.param_dtypes)
    for flag, values, known in (("--peers", args.peers, PEERS), ("--param_dtypes", args.param_dtypes, PARAM_DTYPES)):
        for value in values:
            if value not in known:
                p.error(f"{flag}: unknown value {value!r} (known: {', '.join(known)})")
    if not args.param_dtypes:
        p.error("--param_dtypes: give at least one of " + ", ".join(PARAM_DTYPES))
    for name in ("prompt_len", "new_tokens", "calls", "grpo_prompts", "grpo_group", "grpo_new_tokens", "grpo_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if any(b < 1 for b in args.batches):
        p.error(f"--batches: every batch size must be >= 1, got {args.batches}")
    if args.grpo_warmup < 0:
        p.error("--grpo_warmup must be >= 0")
    if args.skip_decode and not args.grpo:
        p.error("--skip_decode without --grpo leaves nothing to run")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._worker:
        return worker_main(args._worker, args._spec)
    if args.render:  # rewrite the markdown beside a JSON this tool wrote (tables only: no number is measured)
        with open(args.render) as f:
            payload = json.load(f)
        with open(os.path.splitext(args.render)[0] + ".md", "w") as f:
            f.write(render_markdown(payload) + "\n")
        print(f"[decode] rendered {os.path.splitext(args.render)[0]}.md from {args.render}")
        return 0

    log_dir = args.log_dir or (os.path.splitext(args.out)[0] + "_logs" if args.out
                               else tempfile.mkdtemp(prefix="bench_decode_logs_"))
    runner = Runner(log_dir, args.worker_timeout_s, args.time_budget_s, module="bench.decode")
    payload: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
                               "hardware": {}, "decode": [], "grpo": []}
    all_results: list[dict] = []

    def save(result: dict, label: str) -> None:
        all_results.append(result)
        brief = {k: result.get(k) for k in ("status", "error", "perf/step_s")}
        brief["tok/s"] = {key: run.get("tokens_per_s") for key, run in (result.get("runs") or {}).items()}
        print(f"[result] {label} " + json.dumps(brief, default=str), flush=True)
        payload["hardware"] = hardware_record(all_results)
        write_outputs(args.out, payload, render_markdown(payload))

    if not args.skip_decode:
        bandwidth, peak = args.bandwidth_tbps * 1e12, args.peak_tflops * 1e12
        payload["floor_limits"] = {"bandwidth": bandwidth, "peak_flops": peak, "source": "constants"}
        if args.floor_limits != "none":
            copy_mib = args.limits_copy_mib or (64 if args.shapes == ["tiny"] else 2048)
            limits = runner.run("limits", {"copy_bytes": copy_mib << 20, "matmul_n": 1024 if args.shapes == ["tiny"]
                                           else 8192, "repeats": 10}, "limits")
            payload["device_limits"] = limits
            save(limits, "device limits")
            if limits.get("status") == "ok" and args.floor_limits == "measured":
                bandwidth, peak = limits["bandwidth"], limits["peak_flops"]
                payload["floor_limits"] = {"bandwidth": bandwidth, "peak_flops": peak, "source": "measured"}
        for shape in args.shapes:
            for batch in args.batches:
                floor = decode_floor(shape, batch, args.prompt_len, args.new_tokens, bandwidth, peak)
                entry = {"shape": shape, "batch": batch, "prompt_len": args.prompt_len,
                         "new_tokens": args.new_tokens, "floor": floor, "results": {}}
                payload["decode"].append(entry)
                spec = {"shape": shape, "batch": batch, "prompt_len": args.prompt_len,
                        "new_tokens": args.new_tokens, "calls": args.calls, "param_dtypes": args.param_dtypes,
                        "compile_cache": args.compile_cache, "layer_loop": args.layer_loop,
                        "decode_attention": args.decode_attention, "prefill_attention": args.prefill_attention,
                        "profile": args.profile, "dump_hlo": os.path.abspath(args.dump_hlo)
                        if args.dump_hlo else ""}
                for impl in ["ours"] + args.peers:
                    result = runner.run(impl, spec, f"{shape}_b{batch}_{impl}")
                    entry["results"][impl] = result
                    save(result, f"{shape} b{batch} {impl}")

    if args.grpo:
        spec = {"shape": args.grpo_shape, "prompts": args.grpo_prompts, "group": args.grpo_group,
                "new_tokens": args.grpo_new_tokens, "warmup": args.grpo_warmup, "steps": args.grpo_steps,
                "kl_coef": args.grpo_kl_coef, "remat": args.grpo_remat, "compile_cache": args.compile_cache}
        result = runner.run("grpo", spec, f"grpo_{args.grpo_shape}")
        result.update({k: spec[k] for k in ("shape", "prompts", "group", "new_tokens", "warmup", "kl_coef",
                                            "remat")})
        payload["grpo"].append(result)
        save(result, f"grpo {args.grpo_shape}")

    markdown = render_markdown(payload)
    print()
    print(markdown)
    write_outputs(args.out, payload, markdown)
    if args.out:
        print(f"\n[decode] wrote {args.out} and {os.path.splitext(args.out)[0]}.md; logs in {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
