"""Training-step throughput and MFU: our Trainer next to HF transformers + PyTorch peers (eager, torch.compile, Liger).

    python -m bench.train_mfu --shapes=25m,125m,qwen0.5b --steps=20 --out=runs/bench/train_mfu.json
    python -m bench.train_mfu --shapes=125m --peers=all --out=runs/bench/train_mfu_125m.json   # every peer
    python -m bench.train_mfu --shapes=125m --mesh=gpu_1x4 --batch_per_device=16      # weak scaling, 4 GPUs
    python -m bench.train_mfu --shapes=125m --sweep_ours --sweep_remat=none,dots --sweep_batch=16,32
    python -m bench.train_mfu --shapes=tiny --steps=2          # CPU plumbing check (D64 L2 V512, seq 128, batch 4)

Protocol (design/perf_anchors.md section 6a):
- Same architecture on every side (RMSNorm, RoPE, SwiGLU, GQA, tied embeddings), same batch and sequence length per
  device, AdamW, global-norm clipping at 1.0, no remat unless asked. The peers are `Qwen2ForCausalLM`
  (attn_implementation="sdpa") built from a config with the same dims; Qwen2 always has q/k/v biases, so for the
  25M/125M shapes a peer carries D*(Hq+2*Hkv) extra bias parameters per layer (negligible FLOPs; our side has no
  biases there). The 0.5B shape has biases on both sides.
- Dtypes on each side (what the comparison holds equal):
    ours                 params fp32 (master weights), grads fp32, AdamW moments fp32 (optax, mu_dtype = params);
                         matmuls and activations bf16 (model.param_dtype=float32, model.dtype=bfloat16).
    <peer> (fp32 params) params fp32, grads fp32, AdamW moments fp32 (torch.optim.AdamW(fused=True));
                         matmuls and activations bf16 through torch.autocast(bfloat16). The same dtypes as ours:
                         the headline peer is the fastest of these.
    <peer>_bf16          params bf16, grads bf16, AdamW moments bf16 (fused AdamW on the bf16 params, no fp32 master
                         copy), no autocast: what many PyTorch users run; it moves half the optimizer bytes and
                         skips the per-step weight casts, at lower numerical precision than ours. Reported beside
                         the headline, never as it.
- Peers (--peers, comma list or `all`; each with an optional _bf16 suffix): `eager` (HF model as is), `compile`
  (torch.compile(model)), `liger` (liger_kernel.transformers.apply_liger_kernel_to_qwen2: RoPE, RMSNorm, SwiGLU and
  the fused linear cross-entropy, which never materialises the logits), `liger_compile` (Liger + torch.compile).
  Liger ships no torch.compile support for its fused linear cross-entropy (linkedin/Liger-Kernel#174 is open;
  its forward computes the gradients with data-dependent Python, `.item()` and in-place addmm into buffers, which
  Dynamo cannot run on fake tensors): it is wrapped in torch.compiler.disable, a graph break, as the liger-kernels
  build of huggingface/kernels-community does, and the rest of the model (decoder layers with Liger's RMSNorm /
  SwiGLU / RoPE kernels) is compiled. If compiling the whole model still fails (not OOM), the worker rebuilds it
  and compiles each decoder layer alone, head and loss eager, as torchtune does with Liger's loss
  (--liger_compile_scope=auto|model|layers; the row records compile_scope and the first error).
  --liger_flce_in_graph drops the wrapper to reproduce the failure; any error is caught and recorded in the
  row. Every peer computes its loss through HF's own
  `labels=` path (loss inside the model, so inside the compiled graph under torch.compile); --peer_loss=own
  restores the older path (logits out, F.cross_entropy on an fp32 copy of them). Peers run on one GPU;
  compile and Liger peers are GPU-only and are recorded as "skipped" on CPU.
- Synthetic random tokens, one batch built once and kept on the device (no input pipeline in the timing).
- Every (shape, implementation) runs in its own subprocess, so JAX and PyTorch never share GPU memory and
  an out-of-memory in one mode is reported as "OOM" without touching the others. When a side is OOM, the bench
  also measures every side at the largest batch all of them fit (halving, or --fallback_batch first), in
  `results_fallback` / a second table.
- Several devices (--mesh=gpu_1x2 / gpu_1x4 / auto, --parallel=fsdp|data): ours shards the global batch over the
  mesh; the peers run on one GPU at ours' per-device batch (--batch_per_device=N: ours runs N x devices, the
  peers N; --batch=B: the peers run B / devices). Per-device tokens/s is compared.
- Warm-up: the first step (compile, reported as first_step_s) plus --warmup steps. Then --windows timed
  windows of --steps steps each; the only host sync is at the end of a window (block_until_ready on the
  final state / torch.cuda.synchronize). The step time reported is the median window / steps.
- MFU by MaxText's formula (shared.metrics.flops.training_flops_per_token: causal attention halved, the
  input-embedding lookup not counted): the step's FLOP/s over (devices x the per-device vendor bf16 peak, 989
  TFLOP/s for H100/H200; shared.metrics.flops.mfu_on_devices), equal to each device's own MFU; the JSON also has
  the PaLM-convention MFU and the MFU against the measured bf16 matmul peak (--measured_peak_tflops).
  --peak_tflops overrides the per-device peak (a CPU has none in the table).

The parent process imports neither jax nor torch; it launches workers (`--_worker=ours|<peer>`), each of which
prints one `@@RESULT {json}` line. Results are written to --out (JSON) and --out with .md after every worker, so
a run killed part-way keeps what finished.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_MARKER = "@@RESULT "

# Model dims (ours: shared/config/base.py model keys). head_dim * n_heads == d_model for every shape, so
# Qwen2Config (which derives head_dim from hidden_size / num_attention_heads) builds the same layers.
SHAPES: dict[str, dict[str, Any]] = {
    "tiny": dict(d_model=64, n_layers=2, n_heads=2, n_kv_heads=2, head_dim=32, d_ff=128, vocab_size=512,
                 qkv_bias=False, family="llama"),
    "25m": dict(d_model=384, n_layers=8, n_heads=6, n_kv_heads=6, head_dim=64, d_ff=1024, vocab_size=32768,
                qkv_bias=False, family="llama"),
    "125m": dict(d_model=768, n_layers=12, n_heads=12, n_kv_heads=12, head_dim=64, d_ff=2048, vocab_size=50304,
                 qkv_bias=False, family="llama"),
    "qwen0.5b": dict(d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, head_dim=64, d_ff=4864,
                     vocab_size=151936, qkv_bias=True, family="qwen2", rope_theta=1e6),
    # Qwen2.5-1.5B and -7B (their config.json). `tie_embeddings` (a model config key) is read by bench.decode's
    # GRPO / decode workers; this tool's own workers tie the embeddings on every shape.
    "qwen1.5b": dict(d_model=1536, n_layers=28, n_heads=12, n_kv_heads=2, head_dim=128, d_ff=8960,
                     vocab_size=151936, qkv_bias=True, family="qwen2", rope_theta=1e6, tie_embeddings=True),
    "qwen7b": dict(d_model=3584, n_layers=28, n_heads=28, n_kv_heads=4, head_dim=128, d_ff=18944,
                   vocab_size=152064, qkv_bias=True, family="qwen2", rope_theta=1e6, tie_embeddings=False),
}
# Per-shape defaults for --seq / --batch when they are not given (tiny is a CPU plumbing check).
SHAPE_DEFAULTS = {"tiny": {"seq": 128, "batch": 4}}
DEFAULT_SEQ, DEFAULT_BATCH = 2048, 16
PEER_BASES = ("eager", "compile", "liger", "liger_compile")
PEER_MODES = PEER_BASES + tuple(f"{base}_bf16" for base in PEER_BASES)
DEFAULT_PEERS = "eager,compile,compile_bf16,liger,liger_compile"
# What each side keeps in which dtype (params / grads / AdamW moments; compute). `matched` peers hold the same
# dtypes as ours: the headline comparison is against the fastest of them.
PRECISION = {
    "ours": "params fp32 (master), grads fp32, AdamW moments fp32; bf16 matmuls/activations",
    "fp32": "params fp32, grads fp32, fused-AdamW moments fp32; bf16 matmuls/activations (torch.autocast)",
    "bf16": "params bf16, grads bf16, fused-AdamW moments bf16 (no fp32 master copy); bf16 matmuls/activations",
}
PRECISION_SHORT = {"ours": "fp32 master + bf16 compute", "fp32": "fp32 params + bf16 autocast",
                   "bf16": "bf16 params/grads/moments"}
MATCHED_PRECISION = "fp32"
PARALLEL = ("", "fsdp", "data")  # --parallel: the mesh preset's own sizes, all devices on fsdp, or on data
FALLBACKS = ("halve", "none")
REMATS = ("none", "full", "dots", "dots_all", "mlp")   # model.remat (shared/config/validate.py REMAT_MODES)
ATTENTIONS = ("auto", "cudnn", "xla", "tokamax")   # model.attention (tokamax: pip extra "kernels")
# model.tokamax_implementation (shared/config/validate.py TOKAMAX_IMPLEMENTATIONS; not imported: peers need no jax)
TOKAMAX_IMPLEMENTATIONS = ("", "mosaic", "triton", "cudnn", "xla", "xla_chunked")

# Optimizer hyper-parameters shared by both sides (values do not change the speed, only keep it honest).
LR, BETAS, EPS, WEIGHT_DECAY, CLIP = 3e-4, (0.9, 0.95), 1e-8, 0.1, 1.0


# ============================================================================ shared helpers


def model_fields(shape: str) -> dict[str, Any]:
    if shape not in SHAPES:
        raise SystemExit(f"--shapes: unknown shape {shape!r} (known: {', '.join(SHAPES)})")
    fields = dict(SHAPES[shape])
    if fields["n_heads"] * fields["head_dim"] != fields["d_model"]:
        raise SystemExit(f"shape {shape}: n_heads*head_dim != d_model, which Qwen2Config cannot express")
    return fields


def flops_model_config(shape: str) -> dict[str, Any]:
    """What shared.metrics.flops reads (a plain dict works there)."""
    return dict(model_fields(shape), mlp="swiglu", causal=True)


def synthetic_batch(vocab: int, batch: int, seq: int, seed: int = 0) -> dict:
    """Random tokens (not zeros: METHOD.md), one document per row. Same seed -> same tokens on both sides."""
    import numpy as np

    tokens = np.random.default_rng(seed).integers(0, vocab, size=(batch, seq + 1), dtype=np.int64)
    return {
        "inputs": tokens[:, :-1].astype(np.int32),
        "targets": tokens[:, 1:].astype(np.int32),
        "segment_ids": np.ones((batch, seq), np.int32),
        "positions": np.broadcast_to(np.arange(seq, dtype=np.int32), (batch, seq)).copy(),
        "loss_mask": np.ones((batch, seq), np.float32),
    }


def summarize_windows(windows: list[float], steps: int, tokens_per_step: int) -> dict[str, Any]:
    per_step = sorted(w / steps for w in windows)
    step_s = statistics.median(per_step)
    return {"step_s": step_s, "step_s_min": per_step[0], "step_s_max": per_step[-1],
            "tokens_per_s": tokens_per_step / step_s, "window_s": windows}


def is_oom(error: BaseException) -> bool:
    text = f"{type(error).__name__} {error}".lower()
    patterns = ("resource_exhausted", "resource exhausted", "out of memory", "outofmemory", "oom when allocating")
    return any(s in text for s in patterns)


def one_line(error: BaseException, limit: int = 400) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= limit else text[:limit] + " ..."


# ============================================================================ worker: ours (JAX)


def peer_kind(name: str) -> dict[str, Any]:
    """`compile_bf16` -> {compile: True, liger: False, params: "bf16"}; raises ValueError for an unknown name."""
    base, params = (name[:-5], "bf16") if name.endswith("_bf16") else (name, "fp32")
    if base not in PEER_BASES:
        raise ValueError(f"unknown peer {name!r} (known: {', '.join(PEER_MODES)})")
    return {"base": base, "compile": base in ("compile", "liger_compile"), "liger": base.startswith("liger"),
            "params": params}


def make_config(spec: dict, platform_name: str):
    from shared.config import base_config

    config = base_config()
    for key, value in model_fields(spec["shape"]).items():
        config.model[key] = value
    config.model.tie_embeddings = True
    config.model.mlp = "swiglu"
    config.model.remat = spec["remat"]
    config.model.attention = spec["attention"]
    config.model.tokamax_implementation = spec.get("tokamax_implementation", "")
    config.model.max_seq_len = spec["seq"]
    config.model.dtype = "bfloat16"
    config.model.param_dtype = "float32"
    config.mesh.preset = spec["mesh"] or {"gpu": "gpu_1", "tpu": "auto"}.get(platform_name, "cpu_1")
    parallel = spec.get("parallel") or ""
    if parallel:  # every device on one axis: fsdp (params, grads and moments sharded) or data (replicated)
        config.mesh.data, config.mesh.fsdp, config.mesh.tensor = (-1, 1, 1) if parallel == "data" else (1, -1, 1)
    config.data.seq_len = spec["seq"]
    config.train.batch_size = spec["batch"]
    config.train.micro_batches = spec["micro_batches"]
    config.train.steps = 1_000_000  # only shapes the LR schedule
    config.train.progress = False
    config.train.async_checkpoint = False
    config.optim.name = "adamw"
    config.optim.lr = LR
    config.optim.b1, config.optim.b2 = BETAS
    config.optim.eps = EPS
    config.optim.weight_decay = WEIGHT_DECAY
    config.optim.grad_clip = CLIP
    config.optim.warmup_steps = 10
    if spec.get("mu_dtype") and "mu_dtype" in config.optim:   # older trees lack the key
        config.optim.mu_dtype = spec["mu_dtype"]
    return config


def mesh_devices(config) -> int:
    """How many devices the Trainer's mesh will use (the preset may use fewer than are present)."""
    import jax

    from shared.config.mesh import MeshPlan

    return MeshPlan.from_config(config.mesh).usable_device_count(jax.device_count())


def run_ours(spec: dict) -> dict:
    import jax

    if spec.get("compile_cache"):
        jax.config.update("jax_compilation_cache_dir", spec["compile_cache"])
    try:  # every registry, so validate() can check the names; shared.data needs grain
        import shared.builtin  # noqa: F401
        registries_complete = True
    except ImportError:  # grain missing on a bare GPU image: the trainer itself needs only model + train
        import shared.model  # noqa: F401
        import shared.train  # noqa: F401
        registries_complete = False
    from shared import sharding as sh
    from shared.config import validate
    from shared.train.trainer import Trainer

    platform_name = jax.default_backend()
    device = jax.devices()[0]
    info: dict[str, Any] = {"device": device.device_kind, "platform": platform_name,
                            "jax": jax.__version__, "jaxlib": _version("jaxlib"), "flax": _version("flax"),
                            "precision": PRECISION["ours"], "params_dtype": "ours"}
    try:
        from jax._src.lib import cuda_versions  # private; present on CUDA builds only
        info["jax_cudnn"] = cuda_versions.cudnn_get_version() if cuda_versions else None
    except Exception:  # noqa: BLE001  (best effort: a version number for the record)
        pass
    workdir = tempfile.mkdtemp(prefix="train_mfu_ours_")
    trainer = None
    try:
        spec = dict(spec)
        config = make_config(dict(spec, batch=spec.get("batch") or 1), platform_name)
        info["devices"] = devices = mesh_devices(config)
        if spec.get("batch_per_device"):  # weak scaling: the global batch grows with the mesh
            spec["batch"] = spec["batch_per_device"] * devices
            config.train.batch_size = spec["batch"]
        info["batch"] = spec["batch"]
        info["batch_per_device"] = spec["batch"] / devices
        if registries_complete:
            validate(config, num_devices=jax.device_count())
        info["validated"] = registries_complete
        info["compile_cache"] = spec.get("compile_cache") or None
        trainer = Trainer(config, workdir)
        info["attention"] = trainer.attention
        info["mesh"] = dict(trainer.mesh.shape)
        info["devices"] = int(trainer.mesh.size)
        info["params"] = int(sum(x.size for x in jax.tree.leaves(trainer.state["params"])))
        batch = trainer.to_global(synthetic_batch(config.model.vocab_size, spec["batch"], spec["seq"]))
        state, trainer.state = trainer.state, None  # the step donates the state: keep one live reference
        step = trainer._train_step
        with sh.use_mesh(trainer.mesh, trainer.rules):
            start = time.perf_counter()
            state, metrics = step(state, batch)
            jax.block_until_ready(state)
            info["first_step_s"] = time.perf_counter() - start
            for _ in range(spec["warmup"]):
                state, metrics = step(state, batch)
            jax.block_until_ready(state)
            windows = []
            for _ in range(spec["windows"]):
                start = time.perf_counter()
                for _ in range(spec["steps"]):
                    state, metrics = step(state, batch)
                jax.block_until_ready(state)  # the only host sync of the window
                windows.append(time.perf_counter() - start)
        info.update(summarize_windows(windows, spec["steps"], spec["batch"] * spec["seq"]))
        info["loss"] = float(metrics["loss"])
        info["nonfinite_steps"] = int(state["nonfinite"])
        peaks = [(d.memory_stats() or {}).get("peak_bytes_in_use") for d in trainer.mesh.devices.flat
                 if d.process_index == jax.process_index()]
        known = [p for p in peaks if p is not None]
        info["peak_mem_bytes"] = max(known) if known else None  # the fullest device
        if len(peaks) > 1:
            info["peak_mem_bytes_per_device"] = peaks
        info["status"] = "ok"
    except Exception as e:  # noqa: BLE001  (report OOM / errors per mode instead of dying)
        info["status"] = "OOM" if is_oom(e) else "error"
        info["error"] = one_line(e)
    finally:
        if trainer is not None:
            trainer.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return info


# ============================================================================ worker: peer (PyTorch)


def apply_liger(torch, flce_in_graph: bool, compiled: bool) -> dict:
    """Liger's kernels on HF Qwen2 (module-level patches: call before the model is built)."""
    from liger_kernel.transformers import apply_liger_kernel_to_qwen2

    apply_liger_kernel_to_qwen2(rope=True, rms_norm=True, swiglu=True, cross_entropy=False,
                                fused_linear_cross_entropy=True)
    info = {"liger_kernel": _version("liger-kernel"), "triton": _version("triton"),
            "liger_patches": "rope, rms_norm, swiglu, fused_linear_cross_entropy"}
    if compiled and not flce_in_graph:
        # The fused linear cross-entropy computes its gradients inside its forward with data-dependent Python
        # (.item(), in-place addmm into preallocated buffers); Dynamo cannot run it on fake tensors. Keep it out of
        # the graph (a graph break; the kernel is already fused), compile the rest.
        import liger_kernel.transformers.model.qwen2 as liger_qwen2

        liger_qwen2.LigerForCausalLMLoss = torch.compiler.disable(liger_qwen2.LigerForCausalLMLoss)
        info["liger_flce"] = "outside the compiled graph (torch.compiler.disable)"
    elif compiled:
        info["liger_flce"] = "inside the compiled graph (--liger_flce_in_graph)"
    return info


def run_torch(spec: dict) -> dict:
    import torch

    kind = peer_kind(spec["impl"])
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    labels_loss = kind["liger"] or spec.get("peer_loss", "labels") == "labels"
    info: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if cuda else (platform.processor() or "cpu"),
                            "platform": "gpu" if cuda else "cpu", "torch": torch.__version__,
                            "torch_cuda": torch.version.cuda,
                            "torch_cudnn": torch.backends.cudnn.version() if cuda else None,
                            "devices": 1, "batch": spec["batch"], "batch_per_device": spec["batch"],
                            "params_dtype": kind["params"], "precision": PRECISION[kind["params"]],
                            "compiled": kind["compile"], "liger": kind["liger"],
                            "loss_path": "HF labels= (ForCausalLMLoss" + (", Liger fused linear CE)" if kind["liger"]
                                                                           else ")")
                            if labels_loss else "own: F.cross_entropy(logits.float())"}
    if not cuda and (kind["compile"] or kind["liger"]):
        info.update(status="skipped", error="GPU-only peer (torch.compile / Liger's Triton kernels): no CUDA device")
        return info
    import torch.nn.functional as F
    import transformers
    from transformers import AutoModelForCausalLM, Qwen2Config

    info["transformers"] = transformers.__version__
    if kind["liger"]:
        try:
            info.update(apply_liger(torch, bool(spec.get("liger_flce_in_graph")), kind["compile"]))
        except ImportError as e:
            info.update(status="skipped", error=f"liger-kernel not importable ({one_line(e, 200)}); "
                                                "install it from bench/liger_wheels.sh's wheel")
            return info
        except Exception as e:  # noqa: BLE001  (a patch that no longer fits this transformers: say so in the row)
            info.update(status="error", error=f"apply_liger_kernel_to_qwen2: {one_line(e)}")
            return info
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    m = model_fields(spec["shape"])
    hf_config = Qwen2Config(
        vocab_size=m["vocab_size"], hidden_size=m["d_model"], intermediate_size=m["d_ff"],
        num_hidden_layers=m["n_layers"], num_attention_heads=m["n_heads"], num_key_value_heads=m["n_kv_heads"],
        max_position_embeddings=spec["seq"], tie_word_embeddings=True, use_cache=False, rms_norm_eps=1e-6)
    k = spec["micro_batches"]
    param_dtype = torch.bfloat16 if kind["params"] == "bf16" else torch.float32
    autocast = cuda and kind["params"] == "fp32"  # bf16 params compute in bf16 without it
    batch = synthetic_batch(m["vocab_size"], spec["batch"], spec["seq"])
    inputs = torch.from_numpy(batch["inputs"]).long().to(dev).chunk(k)
    targets = torch.from_numpy(batch["targets"]).long().to(dev).chunk(k)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def build(scope: str):
        """Model, optimizer and one training step; scope = what torch.compile wraps (model | layers | none)."""
        model = AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa", dtype=param_dtype)
        info["attention"] = model.config._attn_implementation
        info["params"] = int(sum(p.numel() for p in model.parameters()))
        model.to(dev).train()
        if spec.get("peer_grad_ckpt"):
            model.gradient_checkpointing_enable()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                                      **({"fused": True} if cuda else {}))
        forward = model
        if scope == "model":
            forward = torch.compile(model)
        elif scope == "layers":  # torchtune's way: each decoder layer compiled, head and loss eager
            for layer in model.model.layers:
                layer.compile()

        def train_step():
            for x, y in zip(inputs, targets):  # gradient accumulation when micro_batches > 1
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast):
                    if labels_loss:  # what a user writes: labels = input_ids, HF shifts them inside the model
                        loss = forward(input_ids=x, labels=x).loss / k
                    else:
                        logits = forward(input_ids=x).logits
                if not labels_loss:
                    loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1)) / k
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, CLIP)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss * k

        return model, optimizer, train_step

    scopes = ["model"] if kind["compile"] else ["none"]
    if kind["liger"] and kind["compile"] and spec.get("liger_compile_scope", "auto") != "model":
        # auto: the whole model first; if that compile fails (not OOM), the decoder layers alone
        scopes = ["layers"] if spec.get("liger_compile_scope") == "layers" else ["model", "layers"]
    try:
        for scope in scopes:
            if kind["compile"]:
                info["compile_scope"] = scope
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            model = optimizer = train_step = None
            try:
                model, optimizer, train_step = build(scope)
                start = time.perf_counter()
                loss = train_step()
                sync()
                info["first_step_s"] = time.perf_counter() - start
                break
            except Exception as e:  # noqa: BLE001
                if is_oom(e) or scope == scopes[-1]:
                    raise
                info[f"compile_scope_{scope}_error"] = one_line(e)  # then the next scope, from scratch
                del model, optimizer, train_step
                torch._dynamo.reset()
                if cuda:
                    torch.cuda.empty_cache()
        for _ in range(spec["warmup"]):
            loss = train_step()
        sync()
        windows = []
        for _ in range(spec["windows"]):
            start = time.perf_counter()
            for _ in range(spec["steps"]):
                loss = train_step()
            sync()
            windows.append(time.perf_counter() - start)
        info.update(summarize_windows(windows, spec["steps"], spec["batch"] * spec["seq"]))
        info["loss"] = float(loss.item())
        info["peak_mem_bytes"] = torch.cuda.max_memory_allocated() if cuda else None
        info["status"] = "ok"
    except Exception as e:  # noqa: BLE001
        info["status"] = "OOM" if is_oom(e) else "error"
        info["error"] = one_line(e)
    return info


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


WORKER_ENV = ("XLA_FLAGS", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_PREALLOCATE",
              "PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES")


def worker_main(kind: str, spec_json: str) -> int:
    spec = json.loads(spec_json)
    if kind == "ours" and spec.get("mesh"):
        # The preset's environment and XLA flags (cpu_8: 8 fake host devices; gpu_1xN: the FSDP overlap flags)
        # before jax starts, as shared.launch does. Values already in the environment win.
        from shared.launch import prepare_environment
        from tpu_configs.presets import get_preset

        prepare_environment(get_preset(spec["mesh"]))
    result = run_ours(spec) if kind == "ours" else run_torch(dict(spec, impl=kind))
    result["env"] = {name: os.environ[name] for name in WORKER_ENV if name in os.environ}
    print(RESULT_MARKER + json.dumps(result, default=str), flush=True)
    return 0


# ============================================================================ parent: launching workers


class Runner:
    """Launches one subprocess per measurement, logs its output, enforces timeouts and a total time budget."""

    def __init__(self, log_dir: str, worker_timeout: float, time_budget: float, module: str = "bench.train_mfu"):
        self.log_dir = log_dir
        self.module = module  # the benchmark whose `--_worker` mode runs each measurement
        self.worker_timeout = worker_timeout
        self.deadline = time.time() + time_budget if time_budget > 0 else None
        os.makedirs(log_dir, exist_ok=True)

    def run(self, kind: str, spec: dict, name: str) -> dict:
        timeout = self.worker_timeout
        if self.deadline is not None:
            if self.deadline - time.time() < 10:
                return {"status": "skipped", "error": "--time_budget_s spent"}
            timeout = min(timeout, self.deadline - time.time())
        log_path = os.path.join(self.log_dir, f"{name}.log")
        cmd = [sys.executable, "-m", self.module, f"--_worker={kind}", f"--_spec={json.dumps(spec)}"]
        env = dict(os.environ)
        if kind == "ours":
            # Alone on the card: let XLA take 95 % instead of its default 75 %, as PyTorch may use it all.
            env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")
        print(f"[{self.module.rsplit('.', 1)[-1]}] {name}: running (log {log_path})", flush=True)
        start = time.time()
        with open(log_path, "w") as log:
            # Own session: a timeout kills the worker and anything it spawned (inductor compile workers).
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=max(timeout, 1))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return {"status": "timeout", "error": f"killed after {timeout:.0f} s", "wall_s": time.time() - start}
        with open(log_path) as log:
            lines = log.read().splitlines()
        results = [line[len(RESULT_MARKER):] for line in lines if line.startswith(RESULT_MARKER)]
        if not results:
            tail = " | ".join(lines[-5:])
            return {"status": "error", "error": f"worker exited with code {rc} and no result; log tail: {tail}"}
        result = json.loads(results[-1])
        result["wall_s"] = time.time() - start
        return result


def add_derived(result: dict, shape: str, seq: int, measured_peak: float, peak_override: float = 0.0) -> dict:
    """Per-device tokens/s and MFU over every device of the step: MaxText convention (primary), PaLM convention and
    against the measured matmul peak. `peak_override` (FLOP/s per device) replaces the vendor table's peak."""
    from shared.metrics.flops import (mfu, mfu_on_devices, peak_flops_per_device, training_flops_per_token,
                                      training_flops_per_token_palm)

    model_cfg = flops_model_config(shape)
    devices = int(result.get("devices") or 1)
    result["devices"] = devices
    result["flops_per_token"] = training_flops_per_token(model_cfg, seq)
    result["flops_per_token_palm"] = training_flops_per_token_palm(model_cfg, seq)
    peak = peak_override or peak_flops_per_device(result.get("device", ""))
    result["peak_flops"] = peak  # per device
    result["peak_source"] = "--peak_tflops" if peak_override else "vendor table (shared.metrics.flops)"
    if result.get("status") == "ok":
        tok_s = result["tokens_per_s"]
        result["tokens_per_s_per_device"] = tok_s / devices
        result["mfu"] = mfu_on_devices(tok_s, result["flops_per_token"], peak, devices)
        result["mfu_per_device"] = mfu(tok_s / devices, result["flops_per_token"], peak)  # the same, per device
        result["mfu_palm"] = mfu_on_devices(tok_s, result["flops_per_token_palm"], peak, devices)
        result["mfu_measured_peak"] = (mfu_on_devices(tok_s, result["flops_per_token"], measured_peak, devices)
                                       if peak else None)
    return result


def pick_median(rounds: list[dict]) -> dict:
    """Across --rounds repeats of one (shape, impl): the run with the median tokens/s (OOM etc. if none ran)."""
    ok = sorted((r for r in rounds if r.get("status") == "ok"), key=lambda r: r["tokens_per_s"])
    if not ok:
        return rounds[-1]
    chosen = dict(ok[(len(ok) - 1) // 2])
    if len(rounds) > 1:
        chosen["rounds_tokens_per_s"] = [r.get("tokens_per_s") for r in rounds]
    return chosen


def per_device(result: dict | None) -> float | None:
    if not result or result.get("status") != "ok":
        return None
    return result.get("tokens_per_s_per_device") or result["tokens_per_s"] / int(result.get("devices") or 1)


def dtype_of(impl: str, result: dict) -> str:
    """A PRECISION key; files written before the bf16 peers hold no params_dtype (their peers were fp32 + autocast)."""
    return result.get("params_dtype") or ("ours" if impl == "ours" else "fp32")


def headline(by_impl: dict) -> dict:
    """The headline peer (the fastest that holds ours' dtypes: fp32 params + bf16 autocast) and the fastest peer of
    any precision, with ours' per-device tokens/s over theirs."""
    ours = per_device(by_impl.get("ours"))
    peers = {impl: per_device(r) for impl, r in by_impl.items() if impl != "ours" and per_device(r)}
    matched = {impl: v for impl, v in peers.items() if dtype_of(impl, by_impl[impl]) == MATCHED_PRECISION}
    out: dict[str, Any] = {"rule": "headline = fastest peer with fp32 params + bf16 autocast (ours' dtypes); "
                                   "ratios are per-device tokens/s"}
    for key, pool in (("peer", matched), ("fastest_peer", peers)):
        best = max(pool, key=pool.get) if pool else None
        out[key] = best
        out[f"ours_over_{key}"] = ours / pool[best] if best and ours else None
    return out


# ============================================================================ parent: tables and files


def fmt_tok(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def cell(result: dict | None, key: str) -> str:
    if result is None:
        return "-"
    if result.get("status") != "ok":
        return result.get("status", "?")
    if key == "tok":
        return fmt_tok(per_device(result))
    if key == "both":
        return f"{fmt_tok(per_device(result))} ({fmt_pct(result.get('mfu'))})"
    return fmt_pct(result.get("mfu"))


def ratio(a: dict | None, b: dict | None) -> str:
    """Per-device tokens/s of a over b."""
    pa, pb = per_device(a), per_device(b)
    return fmt_ratio(pa / pb) if pa and pb else "-"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def batch_label(r: dict | None) -> str:
    if not r:
        return "-"
    bpd = r.get("batch_per_device")
    if bpd is None and r.get("batch"):
        bpd = r["batch"] / int(r.get("devices") or 1)
    bpd_text = "-" if bpd is None else (f"{bpd:g}")
    return f"{bpd_text}x{r.get('seq', '')}"


def summary_table(results: dict, headlines: dict | None = None) -> str:
    """One row per shape: ours, every peer (per-device tokens/s and MFU), the headline and fastest peer ratios."""
    peers = []
    for by_impl in results.values():
        peers += [impl for impl in by_impl if impl != "ours" and impl not in peers]
    header = (["shape", "batch/device x seq", "ours devices", "ours tok/s/device", "ours MFU"]
              + [f"{p} tok/s (MFU)" for p in peers]
              + ["headline peer", "ours/headline", "fastest peer", "ours/fastest"])
    rows = []
    for shape, by_impl in results.items():
        ours = by_impl.get("ours")
        h = (headlines or {}).get(shape) or headline(by_impl)
        rows.append([shape, batch_label(ours), str((ours or {}).get("devices", "-")), cell(ours, "tok"),
                     cell(ours, "mfu")] + [cell(by_impl.get(p), "both") for p in peers]
                    + [h.get("peer") or "-", fmt_ratio(h.get("ours_over_peer")),
                       h.get("fastest_peer") or "-", fmt_ratio(h.get("ours_over_fastest_peer"))])
    return markdown_table(header, rows)


def detail_rows(entries: list[tuple[list[str], dict]]) -> list[list[str]]:
    rows = []
    for label, r in entries:
        impl = label[1] if len(label) > 1 and (label[1] == "ours" or label[1] in PEER_MODES) else "ours"
        ok = r.get("status") == "ok"
        mem = r.get("peak_mem_bytes")
        rows.append(label + [
            r.get("status", "?"),
            str(r.get("devices", "-")),
            PRECISION_SHORT[dtype_of(impl, r)],
            f"{1e3 * r['step_s']:.1f}" if ok else "-",
            fmt_tok(r.get("tokens_per_s")) if ok else "-",
            fmt_tok(per_device(r)) if ok else "-",
            fmt_pct(r.get("mfu")) if ok else "-",
            fmt_pct(r.get("mfu_palm")) if ok else "-",
            f"{mem / 2**30:.1f}" if ok and mem else "-",
            f"{r['first_step_s']:.1f}" if "first_step_s" in r else "-",
            f"{r['params'] / 1e6:.2f}" if r.get("params") else "-",
            f"{r['loss']:.3f}" if ok else (r.get("error") or "")[:160].replace("|", "/"),
        ])
    return rows


DETAIL_COLUMNS = ["status", "devices", "dtypes", "step ms", "tok/s", "tok/s/device", "MFU", "MFU (PaLM)",
                  "peak GiB", "first step s", "params M", "loss / error"]


def hardware_record(results: list[dict]) -> dict:
    record: dict[str, Any] = {"host": platform.node(), "python": platform.python_version(),
                              "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}  # per-worker env: results[*].env
    for key in ("device", "platform", "jax", "jaxlib", "flax", "jax_cudnn", "torch", "transformers", "torch_cuda",
                "torch_cudnn", "liger_kernel", "triton"):
        values = sorted({str(r[key]) for r in results if r.get(key) is not None})
        if values:
            record[key] = values[0] if len(values) == 1 else values
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            record["nvidia_smi"] = out.stdout.strip().splitlines()
        except (OSError, subprocess.SubprocessError):
            pass
    return record


def write_outputs(out: str | None, payload: dict, markdown: str) -> None:
    if not out:
        return
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump(payload, f, indent=2, default=str)
    os.replace(out + ".tmp", out)
    md_path = os.path.splitext(out)[0] + ".md"
    with open(md_path, "w") as f:
        f.write(markdown + "\n")


def details_table(results: dict) -> str:
    entries = []
    for shape, by_impl in results.items():
        for impl, r in by_impl.items():
            entries.append(([shape, impl, f"{r.get('batch', '')}x{r.get('seq', '')}"], r))
    return markdown_table(["shape", "impl", "global batch x seq"] + DETAIL_COLUMNS, detail_rows(entries))


def render_markdown(payload: dict) -> str:
    hw = payload["hardware"]
    args = payload["args"]
    lines = ["# Training-step throughput and MFU (`python -m bench.train_mfu`)", "",
             f"Device: {hw.get('device', '?')}; jax {hw.get('jax', '?')} (jaxlib {hw.get('jaxlib', '?')}); "
             f"torch {hw.get('torch', '-')}, transformers {hw.get('transformers', '-')}, "
             f"liger-kernel {hw.get('liger_kernel', '-')}, triton {hw.get('triton', '-')}; "
             f"XLA_FLAGS={hw.get('XLA_FLAGS') or '(none)'}", "",
             "Settings: " + ("" if args["sweep_ours"] else
                             f"remat={args['remat']}, micro_batches={args['micro_batches']}, ") +
             f"attention={args['attention']}"
             f"{':' + args['tokamax_implementation'] if args.get('tokamax_implementation') else ''}, "
             f"mesh={args.get('mesh') or 'default'}"
             f"{', parallel=' + args['parallel'] if args.get('parallel') else ''}, "
             f"{args['steps']} steps x {args['windows']} windows after {args['warmup']} warm-up steps, "
             f"rounds={args['rounds']}, peer loss={args.get('peer_loss', 'own')}. MFU: MaxText formula, the "
             "step's FLOP/s over (devices x the per-device bf16 peak"
             + (f" {args['peak_tflops']:g} TFLOP/s from --peak_tflops)" if args.get("peak_tflops") else ")")
             + ". Peers run on one GPU at ours' per-device batch; ratios compare per-device tokens/s. Headline "
               "peer: the fastest with ours' dtypes (fp32 params + bf16 autocast); `_bf16` peers keep params, "
               "grads and AdamW moments in bf16.", ""]
    if payload.get("results"):
        lines += [summary_table(payload["results"], payload.get("headline")), "", "Details:", "",
                  details_table(payload["results"])]
    if payload.get("results_fallback"):
        notes = "; ".join(f"{shape}: {f['key']} {f['from']} -> {f['to']}"
                          for shape, f in (payload.get("fallback") or {}).items() if f.get("to"))
        lines += ["", f"At the largest batch every side fits (a side was OOM at the batch above; {notes or '-'}):",
                  "", summary_table(payload["results_fallback"], payload.get("headline_fallback")), "",
                  details_table(payload["results_fallback"])]
    if payload.get("sweep"):
        sweep = payload["sweep"]
        lines += ["", f"Sweep of ours on {sweep['shape']} (seq {sweep['seq']}):", ""]
        entries = [([p["remat"], str(p["micro_batches"]), str(p["batch"])], p["result"]) for p in sweep["points"]]
        lines.append(markdown_table(["remat", "micro_batches", "batch"] + DETAIL_COLUMNS, detail_rows(entries)))
        if sweep.get("best"):
            b = sweep["best"]
            lines += ["", f"Best: remat={b['remat']} micro_batches={b['micro_batches']} batch={b['batch']}: "
                          f"{fmt_tok(b['result']['tokens_per_s'])} tok/s, MFU {fmt_pct(b['result'].get('mfu'))}"]
    return "\n".join(lines)


# ============================================================================ parent: main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.train_mfu", description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="25m,125m,qwen0.5b", help="comma list of: 25m, 125m, qwen0.5b")
    p.add_argument("--steps", type=int, default=20, help="timed steps per window")
    p.add_argument("--windows", type=int, default=3, help="timed windows (median reported)")
    p.add_argument("--warmup", type=int, default=3, help="steps after the compiling first step, before timing")
    p.add_argument("--rounds", type=int, default=1, help="repeat ours/peers interleaved this many times; median")
    p.add_argument("--batch", type=int, default=None,
                   help=f"global sequences per step of ours (default {DEFAULT_BATCH}); the peers run batch / devices")
    p.add_argument("--batch_per_device", type=int, default=None,
                   help="sequences per device instead of --batch: ours runs this x its mesh's devices, peers this")
    p.add_argument("--seq", type=int, default=None, help=f"sequence length (default {DEFAULT_SEQ})")
    p.add_argument("--remat", default="none", help="ours: model.remat = none | full | dots | dots_all | mlp")
    p.add_argument("--mu_dtype", default="", choices=("", "bfloat16"),
                   help="ours: optim.mu_dtype, AdamW's first moment ('' = float32 like the peers)")
    p.add_argument("--micro_batches", type=int, default=1, help="gradient accumulation steps (both sides)")
    p.add_argument("--attention", default="auto", help="ours: model.attention = auto | cudnn | xla | tokamax")
    p.add_argument("--tokamax_implementation", default="", choices=TOKAMAX_IMPLEMENTATIONS,
                   help="with --attention=tokamax: its kernel ('' = the library's choice; tokamax 0.0.12's Mosaic "
                        "kernel failed on jax 0.11.2, try triton)")
    p.add_argument("--mesh", default="",
                   help="ours: mesh preset, e.g. gpu_1x2, gpu_1x4, auto (default gpu_1 on GPU, cpu_1 on CPU); its "
                        "XLA flags and environment are applied in the worker")
    p.add_argument("--parallel", default="", help="ours: '' = the preset's axes, fsdp = every device on fsdp, "
                                                  "data = every device on data (params replicated)")
    p.add_argument("--peers", default=DEFAULT_PEERS,
                   help=f"comma list of: {', '.join(PEER_MODES)}; 'all' = every one ('' = none)")
    p.add_argument("--peer_loss", default="labels",
                   help="labels = HF's labels= loss path (default); own = logits out + F.cross_entropy(fp32 copy), "
                        "the older peer (Liger peers always use labels=)")
    p.add_argument("--liger_flce_in_graph", action="store_true",
                   help="liger_compile: leave Liger's fused linear cross-entropy inside the compiled graph (fails "
                        "with torch 2.11; the default wraps it in torch.compiler.disable)")
    p.add_argument("--liger_compile_scope", default="auto",
                   help="liger_compile: model = torch.compile(model); layers = each decoder layer compiled, head + "
                        "loss eager (torchtune's way); auto = model, then layers if that compile fails (recorded)")
    p.add_argument("--peer_grad_ckpt", action="store_true", help="peer: HF gradient checkpointing on")
    p.add_argument("--ours_only", action="store_true", help="skip the PyTorch peers")
    p.add_argument("--fallback", default="halve",
                   help="when a side is OOM: halve = also measure every side at the largest batch all fit "
                        "(halving); none = don't")
    p.add_argument("--fallback_batch", type=int, default=0,
                   help="first batch (per device with --batch_per_device, else global) to try after an OOM; "
                        "halving continues from it")
    p.add_argument("--sweep_ours", action="store_true",
                   help="instead of the side-by-side: sweep (remat, micro_batches, batch) for ours on the first shape")
    p.add_argument("--sweep_remat", default="none,dots,full")
    p.add_argument("--sweep_micro_batches", default="1")
    p.add_argument("--sweep_batch", default="16,32")
    p.add_argument("--peak_tflops", type=float, default=0.0,
                   help="per-device bf16 peak for MFU (default: shared.metrics.flops's table, 989 for H100/H200)")
    p.add_argument("--measured_peak_tflops", type=float, default=810.0,
                   help="measured bf16 matmul TFLOP/s of the card, for the secondary MFU (H100: 810)")
    p.add_argument("--out", default="", help="JSON path; the markdown table goes beside it with .md")
    p.add_argument("--log_dir", default="", help="worker logs (default: <out>_logs or a temp folder)")
    p.add_argument("--worker_timeout_s", type=float, default=900.0)
    p.add_argument("--time_budget_s", type=float, default=0.0,
                   help="total seconds for all workers; workers that would start after it are 'skipped'")
    p.add_argument("--compile_cache", default=os.path.join(tempfile.gettempdir(), "train_mfu_jax_cache"),
                   help="JAX persistent compilation cache folder ('' = off)")
    p.add_argument("--_worker", default="", help=argparse.SUPPRESS)
    p.add_argument("--_spec", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._worker:
        return args
    for flag, values in (("--remat", [args.remat]), ("--sweep_remat", csv_list(args.sweep_remat)),
                         ("--attention", [args.attention])):
        known = ATTENTIONS if flag == "--attention" else REMATS
        for value in values:
            if value not in known:
                p.error(f"{flag}: unknown value {value!r} (known: {', '.join(known)})")
    for name in ("steps", "windows", "rounds", "micro_batches"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    for name in ("batch", "batch_per_device"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if args.batch and args.batch_per_device:
        p.error("give --batch (global) or --batch_per_device, not both")
    if args.parallel not in PARALLEL:
        p.error(f"--parallel: unknown value {args.parallel!r} (known: fsdp, data)")
    if args.fallback not in FALLBACKS:
        p.error(f"--fallback: unknown value {args.fallback!r} (known: {', '.join(FALLBACKS)})")
    if args.liger_compile_scope not in ("auto", "model", "layers"):
        p.error(f"--liger_compile_scope: unknown value {args.liger_compile_scope!r} (known: auto, model, layers)")
    if args.peer_loss not in ("labels", "own"):
        p.error(f"--peer_loss: unknown value {args.peer_loss!r} (known: labels, own)")
    if args.mesh:
        from tpu_configs.presets import PRESETS  # plain dicts: no jax in the parent

        if args.mesh not in PRESETS:
            p.error(f"--mesh: unknown preset {args.mesh!r} (known: {', '.join(PRESETS)})")
    peers = list(PEER_MODES) if args.peers.strip() == "all" else csv_list(args.peers)
    for peer in peers:
        if peer not in PEER_MODES:
            p.error(f"--peers: unknown mode {peer!r} (known: {', '.join(PEER_MODES)}, all)")
    args.peers = peers
    return args


def csv_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def base_spec(args, shape: str) -> dict:
    defaults = SHAPE_DEFAULTS.get(shape, {})
    bpd = args.batch_per_device
    return {"shape": shape, "seq": args.seq or defaults.get("seq", DEFAULT_SEQ),
            "batch": None if bpd else (args.batch or defaults.get("batch", DEFAULT_BATCH)),
            "batch_per_device": bpd, "micro_batches": args.micro_batches,
            "remat": args.remat, "attention": args.attention, "mesh": args.mesh, "parallel": args.parallel,
            "tokamax_implementation": args.tokamax_implementation, "mu_dtype": args.mu_dtype, "steps": args.steps,
            "windows": args.windows, "warmup": args.warmup,
            "compile_cache": args.compile_cache, "peer_grad_ckpt": args.peer_grad_ckpt,
            "peer_loss": args.peer_loss, "liger_flce_in_graph": args.liger_flce_in_graph,
            "liger_compile_scope": args.liger_compile_scope}


def check_spec(spec: dict) -> str | None:
    for key in ("batch", "batch_per_device"):
        if spec.get(key) and spec[key] % spec["micro_batches"]:
            return f"{key} {spec[key]} is not divisible by micro_batches {spec['micro_batches']}"
    return None


def worker_spec(impl: str, spec: dict, ours_devices: int) -> tuple[dict, str | None]:
    """The spec one worker gets, or a reason to skip it. Peers run on one GPU at ours' per-device batch."""
    if impl == "ours":
        return spec, check_spec(spec)
    if spec.get("batch_per_device"):
        batch = spec["batch_per_device"]
    elif spec["batch"] % ours_devices:
        return spec, f"batch {spec['batch']} is not divisible by ours' {ours_devices} devices (the peer's batch)"
    else:
        batch = spec["batch"] // ours_devices
    peer = dict(spec, batch=batch, batch_per_device=None)
    return peer, check_spec(peer)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._worker:
        return worker_main(args._worker, args._spec)

    shapes = csv_list(args.shapes)
    for shape in shapes:
        model_fields(shape)
    peers = [] if args.ours_only or args.sweep_ours else args.peers
    log_dir = args.log_dir or (os.path.splitext(args.out)[0] + "_logs" if args.out
                               else tempfile.mkdtemp(prefix="train_mfu_logs_"))
    runner = Runner(log_dir, args.worker_timeout_s, args.time_budget_s)
    measured_peak = args.measured_peak_tflops * 1e12
    peak_override = args.peak_tflops * 1e12
    payload: dict[str, Any] = {"args": vars(args) | {"peers": peers}, "hardware": {}, "results": {},
                               "headline": {}, "precision": PRECISION, "sweep": None}
    all_results: list[dict] = []

    def record(result: dict, spec: dict, label: str) -> dict:
        peer_remat = "hf_grad_ckpt" if spec["peer_grad_ckpt"] else "none"
        result.setdefault("batch", spec["batch"])  # workers report the batch they ran (ours: per-device x devices)
        result.update(shape=spec["shape"], seq=spec["seq"], micro_batches=spec["micro_batches"],
                      remat=spec["remat"] if label == "ours" else peer_remat)
        add_derived(result, spec["shape"], spec["seq"], measured_peak, peak_override)
        all_results.append(result)
        brief = {k: result.get(k) for k in ("shape", "status", "batch", "devices", "seq", "micro_batches", "remat",
                                             "tokens_per_s", "tokens_per_s_per_device", "step_s", "mfu",
                                             "peak_mem_bytes", "error")}
        print(f"[result] {label} " + json.dumps(brief, default=str), flush=True)
        payload["hardware"] = hardware_record(all_results)
        write_outputs(args.out, payload, render_markdown(payload))
        return result

    ours_devices = {"n": 1}  # of the latest ours run; the peers' batch is ours' per-device batch

    def run_one(impl: str, spec: dict, name: str) -> dict:
        wspec, problem = worker_spec(impl, spec, ours_devices["n"])
        result = {"status": "skipped", "error": problem} if problem else runner.run(impl, wspec, name)
        if impl == "ours" and result.get("devices"):
            ours_devices["n"] = int(result["devices"])
        return record(result, wspec, impl)

    if args.sweep_ours:
        shape = shapes[0]
        points = []
        for remat in csv_list(args.sweep_remat):
            for micro in [int(x) for x in csv_list(args.sweep_micro_batches)]:
                for batch in [int(x) for x in csv_list(args.sweep_batch)]:
                    spec = dict(base_spec(args, shape), remat=remat, micro_batches=micro, batch=batch,
                                batch_per_device=None)
                    name = f"sweep_{shape}_remat-{remat}_mb{micro}_b{batch}"
                    points.append({"remat": remat, "micro_batches": micro, "batch": batch,
                                   "result": run_one("ours", spec, name)})
                    ok = [p for p in points if p["result"].get("status") == "ok"]
                    best = max(ok, key=lambda p: p["result"]["tokens_per_s"]) if ok else None
                    payload["sweep"] = {"shape": shape, "seq": spec["seq"], "points": points, "best": best}
    else:
        impls = ["ours"] + peers
        for shape in shapes:
            spec = base_spec(args, shape)
            runs: dict[str, list[dict]] = {impl: [] for impl in impls}
            for round_index in range(args.rounds):
                for impl in impls:  # interleaved: ours, peer 1, peer 2, ..., ours, peer 1, ...
                    name = f"{shape}_{impl}" + (f"_r{round_index}" if args.rounds > 1 else "")
                    runs[impl].append(run_one(impl, spec, name))
                    payload["results"][shape] = {i: pick_median(r) for i, r in runs.items() if r}
                    payload["headline"][shape] = headline(payload["results"][shape])
                    write_outputs(args.out, payload, render_markdown(payload))
            if args.fallback != "none":
                fallback(args, spec, impls, payload, run_one)

    markdown = render_markdown(payload)
    print()
    print(markdown)
    write_outputs(args.out, payload, markdown)
    if args.out:
        print(f"\n[train_mfu] wrote {args.out} and {os.path.splitext(args.out)[0]}.md; logs in {log_dir}")
    return 0


def fallback(args, spec: dict, impls: list[str], payload: dict, run_one) -> None:
    """After an OOM at the requested batch: halve it (or start at --fallback_batch) until every side that was OOM
    fits, then measure the other sides at that batch too, so one table compares all of them at an equal batch."""
    shape = spec["shape"]
    results = payload["results"][shape]
    pending = [impl for impl in impls if results.get(impl, {}).get("status") == "OOM"]
    if not pending:
        return
    key = "batch_per_device" if spec.get("batch_per_device") else "batch"
    start = spec[key]
    note: dict[str, Any] = {"key": key, "from": start, "to": None, "oom_at_first": list(pending), "tried": []}
    payload.setdefault("fallback", {})[shape] = note
    at_value: dict[int, dict[str, dict]] = {}
    value = start
    while pending:
        value = args.fallback_batch if args.fallback_batch and not note["tried"] else value // 2
        if value < spec["micro_batches"] or value >= start or value in note["tried"]:
            note["stopped"] = f"no smaller {key} to try (next {value}); still OOM: {', '.join(pending)}"
            return
        note["tried"].append(value)
        at = dict(spec, **{key: value})
        still = []
        for impl in pending:
            result = dict(run_one(impl, at, f"{shape}_{impl}_fallback_{key}{value}"), fallback_from={key: start})
            at_value.setdefault(value, {})[impl] = result
            if result.get("status") == "OOM":
                still.append(impl)
        pending = still
    note["to"] = value
    final = at_value[value]
    for impl in impls:  # the sides that fitted at the first batch, and any that fitted only at a larger fallback
        if impl not in final:
            final[impl] = dict(run_one(impl, dict(spec, **{key: value}), f"{shape}_{impl}_fallback_{key}{value}"),
                               fallback_from={key: start})
    payload.setdefault("results_fallback", {})[shape] = {impl: final[impl] for impl in impls}
    payload.setdefault("headline_fallback", {})[shape] = headline(payload["results_fallback"][shape])
    write_outputs(args.out, payload, render_markdown(payload))


if __name__ == "__main__":
    sys.exit(main())
