"""Sampler decode tokens/s against the bandwidth floor and HF `generate`; GRPO step wall-time breakdown.

    python -m bench.decode --shapes=125m --batches=1,256 --out=runs/bench/decode_125m.json
    python -m bench.decode --shapes=qwen0.5b --batches=1,256 --peers=hf,hf_static --out=runs/bench/decode_qwen.json
    python -m bench.decode --grpo --skip_decode --grpo_shape=125m --out=runs/bench/grpo_125m.json
    python -m bench.decode --shapes=tiny --grpo                # CPU plumbing check (seconds; D64 L2 V512)

GRPO rows of issue 17 (one command each, one H100 unless said; 256-token prompts, 512 new tokens, KL on):

    python -m bench.decode --grpo --skip_decode --grpo_shape=qwen0.5b --grpo_prompts=64 --grpo_group=8 \
        --grpo_new_tokens=512 --grpo_prompt_len=256 --grpo_peers=trl --out=runs/bench/grpo_qwen0.5b.json
    python -m bench.decode --grpo --skip_decode --grpo_shape=qwen1.5b --grpo_prompts=32 --grpo_group=8 \
        --grpo_new_tokens=512 --grpo_prompt_len=256 --out=runs/bench/grpo_qwen1.5b.json
    python -m bench.decode --grpo --skip_decode --grpo_shape=qwen7b --grpo_prompts=16 --grpo_group=8 \
        --grpo_new_tokens=512 --grpo_prompt_len=256 --grpo_mesh=gpu_1x4 --out=runs/bench/grpo_qwen7b.json  # 4 GPUs

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
`--grpo_shape` (fp32 master weights, bf16 compute, remat `--grpo_remat` (default full), byte tokenizer, rl/arithmetic
prompts, reward = the task checker, B prompts x G samples, temperature 1, max_new_tokens), kl_coef 0.04 by default so
a reference forward runs. `--grpo_prompt_len=N` makes every prompt exactly N tokens (BOS + N-1 bytes: the task prompt
left-padded with a repeated filler sentence; its "answer" kept for the checker), so the sampler's prompt bucket is N
when N is one of its buckets (32..2048, powers of two); 0 = the task's own short prompts. `--grpo_mesh` is the
learner's mesh preset (default gpu_1 / cpu_1; `auto` = every local device on fsdp; the preset's environment and XLA
flags are set in the worker before jax starts, so cpu_8 gets its 8 fake devices). `--grpo_micro_batch_tokens`,
`--grpo_rollout_max_rows`, `--grpo_rollout_mesh` and `--sample_draw` set rl.micro_batch_tokens /
rl.rollout_max_rows / rl.rollout_mesh / rl.sample_draw where the tree has those keys (the JSON lists the ones it
lacked under ignored_rl_keys). Each step
calls learner.collect / build_batch / update and times them as RLLearner.fit does (perf/rollout_and_reward_s,
perf/logprob_s = behaviour + reference log-prob passes (perf/ref_logprob_s in older trees), perf/update_s,
perf/step_s); the first `--grpo_warmup` steps are excluded (two by default: the update step compiles at step 1 and
again at step 2, because the Trainer's initial optimizer-state counters are not placed on the mesh the way the step's
outputs are), and the mean of the next `--grpo_steps` is reported, with the generated tokens/s over the rollout and
over the whole step, the peak bytes in use of every local device (`memory_stats()['peak_bytes_in_use']`; the table
shows the max and each), the mesh and the learner's micro-batch tokens (`learner.micro_batch_tokens`, where it
exists). The JSON holds the spec, device kind and count and the jax version of each worker.

TRL peer (`--grpo_peers=trl`): HF TRL's GRPOTrainer in its own subprocess on one GPU, on a random-init
Qwen2ForCausalLM of the same shape (saved to a temp folder and named by path, so TRL loads the policy and builds its
reference as it normally does: fp32 weights, bf16 autocast, gradient checkpointing, sdpa), HF generate (no vLLM), a
byte-level tokenizer with our ids built in code, the same prompts (N tokens) and reward, B x G, max_completion_length,
beta = kl_coef, one iteration; per_device_train_batch_size = `--trl_micro_batch` with gradient accumulation so one
optimizer step takes the whole B x G batch, as ours. After `--trl_warmup` steps (1), the mean of `--grpo_steps` steps:
step time (between optimizer steps, synchronized), generation + reward, the no-grad log-prob passes (reference only:
with one iteration TRL reuses the policy's own log-probs), update = the rest; peak memory =
torch.cuda.max_memory_allocated. The GPU image lacks trl and datasets: bench/trl_wheels.sh fetches them as wheels.

The parent process imports neither jax nor torch. Results go to --out (JSON, with the hardware) and --out with
.md after every worker.
"""
from __future__ import annotations

import argparse
import inspect
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
    cfg.tie_embeddings = model_fields(shape).get("tie_embeddings", True)   # qwen7b: untied
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
    from shared.model.sampler import Sampler, SamplingParams

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
            # the private prefill/decode take a row offset (of a batch split over calls) after the key in newer trees
            offset = (jnp.int32(0),) if "row_offset" in inspect.signature(sampler._decode).parameters else ()
            # the sampler's own prompt pass up to its first sampled token (timed alone: prefill_s)
            prefill = jax.jit(lambda params, prompts, lengths: sampler._prefill(
                params, prompts, lengths, key, *offset, max_new_tokens=t, temperature=0.0, top_k=0, top_p=1.0)[:2])

            def generate():
                nonlocal rollout
                rollout = sampler.generate(params, prompts, sampling, key)  # returns numpy: already synced

            def device_only():
                out = sampler._decode_jit(params, prompt_dev, lengths_dev, key, *offset, max_new_tokens=t,
                                          temperature=0.0, top_k=0, top_p=1.0)
                jax.block_until_ready(out)

            if spec.get("dump_hlo"):  # optimized HLO of the whole prefill + decode loop, to check copies/layouts
                os.makedirs(spec["dump_hlo"], exist_ok=True)
                lowered = sampler._decode_jit.lower(params, prompt_dev, lengths_dev, key, *offset,
                                                    max_new_tokens=t, temperature=0.0, top_k=0, top_p=1.0)
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
            max_position_embeddings=p + t, tie_word_embeddings=m.get("tie_embeddings", True), rms_norm_eps=1e-6,
            use_cache=True)
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

GRPO_PEERS = ("trl",)   # HF TRL's GRPOTrainer (HF generate, no vLLM) on the same shape, B x G, prompts and T
# New learner keys (shared/config/base.py rl_config) set from --grpo_* flags when this tree has them.
GRPO_RL_KEYS = ("micro_batch_tokens", "rollout_max_rows", "rollout_mesh", "sample_draw")
PROMPT_FILLER = "The quick brown fox jumps over the lazy dog. "   # pads prompts on the left (--grpo_prompt_len)
SAMPLER_PROMPT_BUCKETS = (32, 64, 128, 256, 512, 1024, 2048)   # shared.model.sampler.SamplingParams.prompt_buckets


def prompt_bucket(prompt_len: int) -> int:
    """The sampler's prompt bucket for prompts of `prompt_len` tokens (itself when it is a bucket)."""
    return next((b for b in SAMPLER_PROMPT_BUCKETS if b >= prompt_len), prompt_len)


def grpo_examples(n: int, seed: int, prompt_len: int = 0) -> list[dict]:
    """rl/arithmetic train examples (ops +-*). prompt_len > 0: every prompt is left-padded with filler text to exactly
    prompt_len - 1 UTF-8 bytes, so BOS + its byte tokens are prompt_len tokens with the byte tokenizer; "answer" is
    kept, so the task checker still gives the reward."""
    from shared.data.examples import load_task

    examples = load_task("rl/arithmetic", "train", n, seed, ops="+-*")
    if prompt_len <= 0:
        return examples
    padded = []
    for example in examples:
        room = prompt_len - 1 - len(example["prompt"].encode("utf-8"))
        if room < 0:
            raise ValueError(f"--grpo_prompt_len={prompt_len} is shorter than BOS + the task prompt "
                             f"{example['prompt']!r} ({len(example['prompt'].encode('utf-8')) + 1} tokens)")
        text = PROMPT_FILLER * (room // len(PROMPT_FILLER) + 1)
        padded.append(dict(example, prompt=text[len(text) - room:] + example["prompt"]))
    return padded


def grpo_config(spec: dict, platform_name: str):
    import ml_collections
    from shared.config import base_config

    c = base_config()
    c.task = "rl"
    fields = model_fields(spec["shape"])
    for key, value in fields.items():
        c.model[key] = value
    c.model.tie_embeddings = fields.get("tie_embeddings", True)   # qwen7b: untied, as the real model
    c.model.mlp = "swiglu"
    c.model.remat = spec["remat"]
    c.model.dtype = "bfloat16"
    c.model.param_dtype = "float32"
    # room for the prompt bucket + the new tokens (rope tables, max positions)
    c.model.max_seq_len = max(int(c.model.max_seq_len),
                              prompt_bucket(spec.get("prompt_len") or 32) + spec["new_tokens"])
    c.data.tokenizer = "byte"     # ids < 259 fit every shape's vocab
    c.mesh.preset = spec.get("mesh") or {"gpu": "gpu_1"}.get(platform_name, "cpu_1")
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
    for key in GRPO_RL_KEYS:
        if key in c.rl and key in spec:
            c.rl[key] = spec[key]
    c.train.steps = 1_000_000
    c.train.progress = False
    c.train.async_checkpoint = False
    c.optim.lr = 1e-6             # the value does not change the speed
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 1
    return c


def apply_mesh_environment(mesh: str) -> None:
    """A mesh preset's environment and XLA flags (cpu_8: 8 fake host devices; gpu_1x8: the FSDP overlap flags),
    applied before jax starts, as shared.launch does. Values already in the environment win."""
    if mesh:
        from shared.launch import prepare_environment
        from tpu_configs.presets import get_preset

        prepare_environment(get_preset(mesh))


def device_memory() -> dict:
    """Peak and limit bytes of every local device (None where the backend keeps no stats, e.g. CPU)."""
    import jax

    peaks, limits = [], []
    for device in jax.local_devices():
        stats = device.memory_stats() or {}
        peaks.append(stats.get("peak_bytes_in_use"))
        limits.append(stats.get("bytes_limit"))
    known = [p for p in peaks if p is not None]
    return {"peak_mem_bytes": max(known) if known else None, "peak_mem_bytes_per_device": peaks,
            "bytes_limit_per_device": limits}


def learner_settings(learner, examples: list[dict]) -> dict:
    """What the learner resolved, where this tree has it: micro-batch tokens per device, rows per sampler call (a
    method of the prompts' length; cached, so asking first changes nothing), the rollout mesh's axis sizes."""
    out: dict[str, Any] = {}
    if isinstance(getattr(learner, "micro_batch_tokens", None), (int, float)):
        out["micro_batch_tokens"] = learner.micro_batch_tokens
    if callable(getattr(learner, "rollout_max_rows", None)):
        try:
            out["rollout_max_rows"] = int(learner.rollout_max_rows(learner.encode_prompts(examples)))
        except Exception:  # noqa: BLE001  (another signature: not recorded)
            pass
    rollout_mesh = getattr(learner, "rollout_mesh", None)
    if rollout_mesh is not None and hasattr(rollout_mesh, "shape"):
        out["rollout_mesh"] = {k: int(v) for k, v in rollout_mesh.shape.items()}
    return out


def run_grpo(spec: dict) -> dict:
    # Alone on the card(s): let XLA take 95 % instead of its default 75 % (an explicit setting wins).
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")
    try:
        apply_mesh_environment(spec.get("mesh") or "")
    except Exception as e:  # noqa: BLE001  (an unknown preset: reported as the worker's result)
        return {"status": "error", "error": one_line(e)}
    import jax
    import numpy as np

    use_compile_cache(spec)
    import shared.builtin  # noqa: F401  (rewards, tasks, tokenizers; shared.data needs grain)
    from shared.data import build_tokenizer
    from shared.rewards import RewardManager
    from shared.rl.learner import RLLearner
    from shared.rl.task import reward_specs

    info = jax_info()
    info.update(device_kind=jax.devices()[0].device_kind, device_count=jax.device_count(),
                local_device_count=jax.local_device_count(), spec=spec)
    workdir = tempfile.mkdtemp(prefix="bench_decode_grpo_")
    learner = None
    try:
        config = grpo_config(spec, jax.default_backend())
        info["mesh_preset"] = config.mesh.preset
        info["ignored_rl_keys"] = [k for k in GRPO_RL_KEYS if k not in config.rl]  # keys this tree lacks
        info["rl_keys"] = {k: config.rl[k] for k in GRPO_RL_KEYS if k in config.rl}
        tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
        train = grpo_examples(int(config.rl.n_train), int(config.seed), int(spec.get("prompt_len") or 0))
        learner = RLLearner(config, workdir, tokenizer, train, {}, RewardManager(reward_specs(config)))
        info["mesh"] = {name: int(size) for name, size in learner.mesh.shape.items()}
        info["attention"] = learner.trainer.attention
        info["params"] = int(sum(x.size for x in jax.tree.leaves(learner.trainer.state["params"])))
        info.update(learner_settings(learner, train[:spec["prompts"]]))
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
            # behaviour + reference log-prob passes ("perf/ref_logprob_s" in trees before the key was renamed)
            logprob_s = times.get("perf/logprob_s", times.get("perf/ref_logprob_s"))
            steps.append({"perf/rollout_and_reward_s": t1 - t0, "perf/update_s": t3 - t2, "perf/step_s": t3 - t0,
                          "perf/logprob_s": logprob_s, "build_batch_s": t2 - t1,
                          "learner_times": {k: float(v) for k, v in times.items()},
                          "generated_tokens": int(r.lengths.sum()), "rows": int(r.tokens.shape[0]),
                          "prompt_bucket": int(r.prompt_tokens.shape[1]),
                          "prompt_lengths": [int(r.prompt_lengths.min()), int(r.prompt_lengths.max())],
                          "response_length": float(r.lengths.mean()), "reward_mean": float(scored.rewards.mean()),
                          "loss": update.get("loss")})
        timed = steps[spec["warmup"]:]
        mean = {k: float(np.mean([s[k] for s in timed]))
                for k in ("perf/rollout_and_reward_s", "perf/logprob_s", "perf/update_s", "perf/step_s",
                          "build_batch_s", "generated_tokens", "response_length")}
        rows, bucket = timed[-1]["rows"], timed[-1]["prompt_bucket"]
        info.update(mean)
        info["perf/ref_logprob_s"] = mean["perf/logprob_s"]   # the old key, for readers of earlier JSON
        info["rollout_tokens_per_s"] = mean["generated_tokens"] / mean["perf/rollout_and_reward_s"]
        info["step_generated_tokens_per_s"] = mean["generated_tokens"] / mean["perf/step_s"]
        info["rollout_padded_tokens_per_s"] = rows * spec["new_tokens"] / mean["perf/rollout_and_reward_s"]
        info["update_tokens_per_s"] = rows * (bucket + spec["new_tokens"]) / mean["perf/update_s"]  # padded rows
        info["rows"], info["prompt_bucket"] = rows, bucket
        info["prompt_lengths"] = timed[-1]["prompt_lengths"]
        info["steps"] = steps
        info["decode_traces"] = learner.sampler.trace_counts["decode"]
        info["status"] = "ok"
    except Exception as e:  # noqa: BLE001
        info["status"] = "OOM" if is_oom(e) else "error"
        info["error"] = one_line(e)
    finally:
        try:
            info.update(device_memory())   # also after an OOM: how far it got
        except Exception:  # noqa: BLE001
            pass
        if learner is not None:
            learner.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return info


# ============================================================================ worker: HF TRL GRPOTrainer peer


def byte_tokenizer_hf():
    """A transformers tokenizer with shared.data's byte ids (pad 0, bos 1, eos 2, byte b -> b + 3) built in code (no
    download): a byte-level BPE without merges, BOS prepended by its post-processor."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    byte_chars = pre_tokenizers.ByteLevel.alphabet()   # the 256 printable stand-ins of the bytes
    # the GPT-2 byte -> character table (the same as the alphabet, ordered by byte)
    table = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = table[:], 0
    for b in range(256):
        if b not in table:
            table.append(b)
            chars.append(256 + extra)
            extra += 1
    byte_to_char = {b: chr(c) for b, c in zip(table, chars)}
    assert set(byte_to_char.values()) == set(byte_chars)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{byte_to_char[b]: b + 3 for b in range(256)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   padding_side="left")


def run_trl(spec: dict) -> dict:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")   # shared.data imports jax: keep it off the GPU
    # One GPU: GRPOTrainer refuses nn.DataParallel over several visible GPUs (set before torch starts CUDA).
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or "," in visible:
        os.environ["CUDA_VISIBLE_DEVICES"] = (visible or "0").split(",")[0]
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    info: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if cuda else (platform.processor() or "cpu"),
                            "platform": "gpu" if cuda else "cpu", "torch": torch.__version__,
                            "transformers": transformers.__version__, "torch_cuda": torch.version.cuda,
                            "device_count": torch.cuda.device_count() if cuda else 1, "spec": spec,
                            "trl": _version("trl"), "datasets": _version("datasets"),
                            "accelerate": _version("accelerate")}
    workdir = tempfile.mkdtemp(prefix="bench_decode_trl_")
    try:
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, Qwen2Config, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        from shared.data.examples import checker

        torch.manual_seed(0)
        m = model_fields(spec["shape"])
        b, g, t, p = spec["prompts"], spec["group"], spec["new_tokens"], spec.get("prompt_len") or 0
        micro = spec["micro_batch"]
        if (b * g) % micro:
            raise ValueError(f"--trl_micro_batch={micro} does not divide B x G = {b * g}")
        tokenizer = byte_tokenizer_hf()
        examples = grpo_examples(2000, 0, p)
        lengths = {len(tokenizer(e["prompt"])["input_ids"]) for e in examples[:256]}
        if p and lengths != {p}:
            raise RuntimeError(f"prompts tokenize to {sorted(lengths)} tokens, expected {p}")
        info["prompt_tokens"] = sorted(lengths)[:8]
        hf_config = Qwen2Config(
            vocab_size=m["vocab_size"], hidden_size=m["d_model"], intermediate_size=m["d_ff"],
            num_hidden_layers=m["n_layers"], num_attention_heads=m["n_heads"], num_key_value_heads=m["n_kv_heads"],
            max_position_embeddings=max(2048, prompt_bucket(p or 32) + t),
            tie_word_embeddings=m.get("tie_embeddings", True), rms_norm_eps=1e-6,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)
        # Saved and named by path, as TRL is normally used: it loads the policy and builds the reference from it
        # (fp32 weights, as its default; bf16 autocast from GRPOConfig.bf16 on GPU).
        model_dir = os.path.join(workdir, "model")
        AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32).save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        check = checker("rl/arithmetic")

        def task_reward(prompts, completions, answer, **_):
            return [float(check({"answer": a}, c)) for a, c in zip(answer, completions)]

        steps = spec["warmup"] + spec["steps"]
        args = GRPOConfig(
            output_dir=os.path.join(workdir, "out"), per_device_train_batch_size=micro,
            gradient_accumulation_steps=b * g // micro,   # one optimizer step per B x G rollout batch, as ours
            num_generations=g, max_completion_length=t, temperature=1.0, beta=spec["kl_coef"], num_iterations=1,
            learning_rate=1e-6, lr_scheduler_type="constant", warmup_steps=0, max_steps=steps, logging_steps=1,
            save_strategy="no", report_to="none", disable_tqdm=True, seed=0, bf16=cuda, use_cpu=not cuda,
            dataloader_num_workers=0)
        train = Dataset.from_list([{"prompt": e["prompt"], "answer": e["answer"]} for e in examples])
        trainer = GRPOTrainer(model=model_dir, reward_funcs=task_reward, args=args, train_dataset=train,
                              processing_class=tokenizer)
        info["attention"] = trainer.model.config._attn_implementation
        info["params"] = int(sum(x.numel() for x in trainer.model.parameters()))
        info["param_dtype"] = str(next(trainer.model.parameters()).dtype)
        info["gradient_checkpointing"] = bool(args.gradient_checkpointing)
        info["generation_batch_size"] = args.generation_batch_size
        info["micro_batch"] = micro
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        bucket: dict[str, float] = {}

        def timed(fn, name, no_grad_only=False):
            def wrapper(*a, **kw):
                if no_grad_only and torch.is_grad_enabled():
                    return fn(*a, **kw)
                sync()
                start = time.perf_counter()
                out = fn(*a, **kw)
                sync()
                bucket[name] = bucket.get(name, 0.0) + time.perf_counter() - start
                return out
            return wrapper

        trainer._generate = timed(trainer._generate, "generate_s")
        trainer._calculate_rewards = timed(trainer._calculate_rewards, "reward_s")
        trainer._get_per_token_logps_and_entropies = timed(trainer._get_per_token_logps_and_entropies,
                                                           "logprob_s", no_grad_only=True)
        trainer._generate_and_score_completions = timed(trainer._generate_and_score_completions, "score_s")
        records: list[dict] = []

        class Timer(TrainerCallback):
            last = None

            def on_train_begin(self, args, state, control, **kwargs):
                sync()
                Timer.last = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                sync()
                now = time.perf_counter()
                records.append({"step_s": now - Timer.last, **bucket})
                bucket.clear()
                Timer.last = now

            def on_log(self, args, state, control, logs=None, **kwargs):
                if records and logs and "train_runtime" not in logs:   # not the end-of-training summary
                    records[-1].setdefault("logs", {}).update(
                        {k: v for k, v in logs.items() if isinstance(v, (int, float))})

        trainer.add_callback(Timer())
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
        steps_out = []
        for rec in records:
            logs = rec.get("logs", {})
            mean_len = logs.get("completions/mean_length")
            gen = rec.get("generate_s", 0.0)
            steps_out.append({
                "perf/step_s": rec["step_s"], "perf/rollout_and_reward_s": gen + rec.get("reward_s", 0.0),
                "perf/logprob_s": rec.get("logprob_s", 0.0), "perf/update_s": rec["step_s"] - rec.get("score_s", 0.0),
                "generate_s": gen, "score_s": rec.get("score_s", 0.0),
                "generated_tokens": mean_len * b * g if mean_len is not None else None,
                "response_length": mean_len, "reward_mean": logs.get("reward"), "kl": logs.get("kl"),
                "loss": logs.get("loss"), "trl_step_time": logs.get("step_time")})
        if len(steps_out) != steps:
            raise RuntimeError(f"TRL ran {len(steps_out)} optimizer steps, expected {steps}")
        timed_steps = steps_out[spec["warmup"]:]
        for key in ("perf/rollout_and_reward_s", "perf/logprob_s", "perf/update_s", "perf/step_s", "generate_s",
                    "generated_tokens", "response_length"):
            values = [s[key] for s in timed_steps if s[key] is not None]
            info[key] = float(statistics.mean(values)) if values else None
        if info["generated_tokens"]:
            info["rollout_tokens_per_s"] = info["generated_tokens"] / info["perf/rollout_and_reward_s"]
            info["step_generated_tokens_per_s"] = info["generated_tokens"] / info["perf/step_s"]
        info["rows"], info["prompt_bucket"] = b * g, p or None
        info["steps"] = steps_out
        info["peak_mem_bytes"] = torch.cuda.max_memory_allocated() if cuda else None
        info["peak_mem_bytes_per_device"] = [info["peak_mem_bytes"]]
        info["peak_mem_reserved_bytes"] = torch.cuda.max_memory_reserved() if cuda else None
        info["status"] = "ok"
    except Exception as e:  # noqa: BLE001
        info["status"] = "OOM" if is_oom(e) else "error"
        info["error"] = one_line(e)
        if cuda:
            info["peak_mem_bytes"] = torch.cuda.max_memory_allocated()
    finally:
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
    elif kind == "trl":
        result = run_trl(spec)
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


def gib(x: float | None) -> str:
    return "-" if x is None else f"{x / 2**30:.1f}"


def grpo_mesh_cell(r: dict) -> str:
    if r.get("impl") == "trl":
        return "torch, 1 GPU" if r.get("platform") == "gpu" else "torch, cpu"
    def axes(mesh):
        return ", ".join(f"{k}={v}" for k, v in (mesh or {}).items() if v != 1) or "1 device"

    preset = r.get("mesh_preset") or (r.get("spec") or {}).get("mesh") or ""
    text = f"{preset} ({axes(r.get('mesh'))})" if preset else axes(r.get("mesh"))
    rollout = r.get("rollout_mesh")
    if isinstance(rollout, dict) and rollout != r.get("mesh"):
        text += f"; rollout {axes(rollout)}"
    return text


def grpo_micro_cell(r: dict) -> str:
    if r.get("impl") == "trl":
        return f"{r['micro_batch']} rows" if r.get("micro_batch") else "-"
    value = r.get("micro_batch_tokens")
    return "-" if value is None else (fmt_tok(value) if isinstance(value, (int, float)) else str(value))


def grpo_table(results: list[dict]) -> str:
    header = ["shape", "impl", "B x G", "prompt (bucket)", "new tokens", "rollout+reward s", "log-probs s",
              "update s", "step s", "gen tok/s (rollout)", "gen tok/s (step)", "mean response len",
              "peak GiB/device (max; each)", "mesh", "micro-batch tokens", "warm-up steps s", "status / error"]
    rows = []
    for r in results:
        ok = r.get("status") == "ok"
        spec = r.get("spec") or r

        def sec(*keys):
            value = next((r[k] for k in keys if r.get(k) is not None), None)
            return f"{value:.3f}" if ok and value is not None else "-"

        peaks = r.get("peak_mem_bytes_per_device") or []
        mem = gib(r.get("peak_mem_bytes"))
        if len(peaks) > 1 and any(x is not None for x in peaks):
            mem += " (" + " / ".join(gib(x) for x in peaks) + ")"
        prompt_len = spec.get("prompt_len") or 0
        bucket = r.get("prompt_bucket")
        prompt = (f"{prompt_len} ({bucket})" if prompt_len else f"task ({bucket})") if bucket else (
            str(prompt_len) if prompt_len else "task")
        warm = r.get("steps", [])[:r.get("warmup", spec.get("warmup", 0))] if ok else []
        rows.append([r["shape"], r.get("impl", "ours"), f"{r['prompts']} x {r['group']}", prompt,
                     str(r["new_tokens"]), sec("perf/rollout_and_reward_s"),
                     sec("perf/logprob_s", "perf/ref_logprob_s"), sec("perf/update_s"), sec("perf/step_s"),
                     fmt_tok(r.get("rollout_tokens_per_s")) if ok else "-",
                     fmt_tok(r.get("step_generated_tokens_per_s")) if ok else "-",
                     f"{r['response_length']:.1f}" if ok and r.get("response_length") is not None else "-",
                     mem, grpo_mesh_cell(r), grpo_micro_cell(r),
                     ", ".join(f"{s['perf/step_s']:.1f}" for s in warm) or "-",
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
        lines += ["", "GRPO step (ours: RLLearner; trl: TRL GRPOTrainer with HF generate; mean over the timed "
                      "steps after the warm-up steps). log-probs = the no-grad log-prob passes before the update "
                      "(ours: behaviour + reference, perf/logprob_s; trl: reference only, since with one iteration "
                      "it reuses the policy's own log-probs); update = the optimizer step(s) with their "
                      "forward/backward; "
                      "gen tok/s = generated tokens / rollout+reward s (rollout) or / step s (step); peak GiB = "
                      "peak bytes in use per device (JAX memory_stats; torch max_memory_allocated):", "",
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
    p.add_argument("--sample_draw", default="inverse_cdf", choices=("gumbel", "inverse_cdf"),
                   help="--grpo: rl.sample_draw, how a rollout token is drawn (the decode rows are greedy)")
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
                   help="rl.kl_coef (GRPO paper 0.04): > 0 adds the reference forward to perf/logprob_s")
    p.add_argument("--grpo_remat", default="full", help="model.remat of the policy (none | full | dots | dots_all | mlp)")
    p.add_argument("--grpo_prompt_len", type=int, default=0,
                   help="prompts of exactly N tokens (BOS + N-1 bytes: the task prompt left-padded with filler "
                        "text); 0 = the task's own short prompts")
    p.add_argument("--grpo_mesh", default="",
                   help="mesh preset of the learner (tpu_configs/presets.py: auto = every local device on fsdp); "
                        "default gpu_1 on GPU, cpu_1 on CPU")
    p.add_argument("--grpo_micro_batch_tokens", type=int, default=0,
                   help="rl.micro_batch_tokens (tokens per micro-batch of the log-prob passes and the update; 0 = "
                        "auto from device memory)")
    p.add_argument("--grpo_rollout_max_rows", type=int, default=0,
                   help="rl.rollout_max_rows (rows per sampler call; 0 = auto)")
    p.add_argument("--grpo_rollout_mesh", default="auto",
                   help="rl.rollout_mesh: auto (the learner's default: data on several devices when the copy fits) | "
                        "'' = decode on the training mesh with its fsdp-sharded weights | data = a replicated bf16 "
                        "copy, rows split | tensor = a resharded tensor-parallel bf16 copy")
    p.add_argument("--grpo_peers", default="",
                   help=f"comma list of: {', '.join(GRPO_PEERS)} (TRL GRPOTrainer, HF generate; '' = none)")
    p.add_argument("--trl_micro_batch", type=int, default=None,
                   help="trl: per_device_train_batch_size (rows per forward/backward; gradient accumulation makes "
                        "one optimizer step per B x G batch); default 16, capped at B x G")
    p.add_argument("--trl_warmup", type=int, default=1, help="trl: untimed first steps")
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
    if args.grpo_warmup < 0 or args.trl_warmup < 0:
        p.error("--grpo_warmup and --trl_warmup must be >= 0")
    for name in ("grpo_prompt_len", "grpo_micro_batch_tokens", "grpo_rollout_max_rows"):
        if getattr(args, name) < 0:
            p.error(f"--{name} must be >= 0")
    if args.grpo_mesh:
        from tpu_configs.presets import PRESETS   # plain dicts: no jax in the parent

        if args.grpo_mesh not in PRESETS:
            p.error(f"--grpo_mesh: unknown preset {args.grpo_mesh!r} (known: {', '.join(PRESETS)})")
    args.grpo_peers = csv_list(args.grpo_peers)
    for peer in args.grpo_peers:
        if peer not in GRPO_PEERS:
            p.error(f"--grpo_peers: unknown value {peer!r} (known: {', '.join(GRPO_PEERS)})")
    rows = args.grpo_prompts * args.grpo_group
    args.trl_micro_batch = args.trl_micro_batch or min(16, rows)
    if "trl" in args.grpo_peers and rows % args.trl_micro_batch:
        p.error(f"--trl_micro_batch={args.trl_micro_batch} must divide B x G = {rows}")
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
        brief = {k: result.get(k) for k in ("status", "error", "perf/step_s", "peak_mem_bytes")}
        brief["tok/s"] = {key: run.get("tokens_per_s") for key, run in (result.get("runs") or {}).items()}
        print(f"[result] {label} " + json.dumps(brief, default=str), flush=True)
        payload["hardware"] = hardware_record(all_results)
        for key in ("device_count", "trl", "datasets", "accelerate"):   # beyond train_mfu's record
            values = sorted({str(r[key]) for r in all_results if r.get(key) is not None})
            if values:
                payload["hardware"][key] = values[0] if len(values) == 1 else values
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
                "new_tokens": args.grpo_new_tokens, "prompt_len": args.grpo_prompt_len, "warmup": args.grpo_warmup,
                "steps": args.grpo_steps, "kl_coef": args.grpo_kl_coef, "remat": args.grpo_remat,
                "mesh": args.grpo_mesh, "micro_batch_tokens": args.grpo_micro_batch_tokens,
                "rollout_max_rows": args.grpo_rollout_max_rows, "rollout_mesh": args.grpo_rollout_mesh,
                "sample_draw": args.sample_draw, "compile_cache": args.compile_cache}
        specs = [("ours", "grpo", spec)]
        if "trl" in args.grpo_peers:
            specs.append(("trl", "trl", {"shape": args.grpo_shape, "prompts": args.grpo_prompts,
                                         "group": args.grpo_group, "new_tokens": args.grpo_new_tokens,
                                         "prompt_len": args.grpo_prompt_len, "warmup": args.trl_warmup,
                                         "steps": args.grpo_steps, "kl_coef": args.grpo_kl_coef,
                                         "micro_batch": args.trl_micro_batch}))
        for impl, kind, worker_spec in specs:
            name = f"grpo_{args.grpo_shape}" + ("" if impl == "ours" else f"_{impl}")
            result = runner.run(kind, worker_spec, name)
            result.update({k: worker_spec[k] for k in ("shape", "prompts", "group", "new_tokens", "warmup",
                                                       "kl_coef")})
            result.update(impl=impl, spec=worker_spec, remat=worker_spec.get("remat"))
            payload["grpo"].append(result)
            save(result, f"grpo {args.grpo_shape} {impl}")

    markdown = render_markdown(payload)
    print()
    print(markdown)
    write_outputs(args.out, payload, markdown)
    if args.out:
        print(f"\n[decode] wrote {args.out} and {os.path.splitext(args.out)[0]}.md; logs in {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
