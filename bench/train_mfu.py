"""Training-step throughput and MFU: our Trainer next to HF transformers + PyTorch (eager, torch.compile).

    python -m bench.train_mfu --shapes=25m,125m,qwen0.5b --steps=20 --out=runs/bench/train_mfu.json
    python -m bench.train_mfu --shapes=125m --sweep_ours --sweep_remat=none,dots --sweep_batch=16,32
    python -m bench.train_mfu --shapes=tiny --steps=2          # CPU plumbing check (D64 L2 V512, seq 128, batch 4)

Protocol (design/perf_anchors.md section 6a):
- Same architecture on both sides (RMSNorm, RoPE, SwiGLU, GQA, tied embeddings), same global batch and
  sequence length, fp32 master weights with bf16 compute, AdamW, global-norm clipping at 1.0, no remat
  unless asked. The peer is `Qwen2ForCausalLM` (attn_implementation="sdpa") built from a config with the
  same dims; Qwen2 always has q/k/v biases, so for the 25M/125M shapes the peer carries D*(Hq+2*Hkv)
  extra bias parameters per layer (negligible FLOPs; our side has no biases there). The 0.5B shape has
  biases on both sides.
- Synthetic random tokens, one batch built once and kept on the device (no input pipeline in the timing).
- Every (shape, implementation) runs in its own subprocess, so JAX and PyTorch never share GPU memory and
  an out-of-memory in one mode is reported as "OOM" without touching the others.
- Warm-up: the first step (compile, reported as first_step_s) plus --warmup steps. Then --windows timed
  windows of --steps steps each; the only host sync is at the end of a window (block_until_ready on the
  final state / torch.cuda.synchronize). The step time reported is the median window / steps.
- MFU by MaxText's formula (shared.metrics.flops.training_flops_per_token: causal attention halved, the
  input-embedding lookup not counted) against the vendor bf16 peak (989 TFLOP/s for H100/H200); the JSON
  also has the PaLM-convention MFU and the MFU against the measured bf16 matmul peak (--measured_peak_tflops).

The parent process imports neither jax nor torch; it launches workers (`--_worker=ours|eager|compile`),
each of which prints one `@@RESULT {json}` line. Results are written to --out (JSON) and --out with .md
after every worker, so a run killed part-way keeps what finished.
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
PEER_MODES = ("eager", "compile")
REMATS = ("none", "full", "dots", "dots_all")  # shared.model.transformer.REMAT_POLICIES
ATTENTIONS = ("auto", "cudnn", "xla")

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


def make_config(spec: dict, platform_name: str):
    from shared.config import base_config

    config = base_config()
    for key, value in model_fields(spec["shape"]).items():
        config.model[key] = value
    config.model.tie_embeddings = True
    config.model.mlp = "swiglu"
    config.model.remat = spec["remat"]
    config.model.attention = spec["attention"]
    config.model.max_seq_len = spec["seq"]
    config.model.dtype = "bfloat16"
    config.model.param_dtype = "float32"
    config.mesh.preset = spec["mesh"] or {"gpu": "gpu_1", "tpu": "auto"}.get(platform_name, "cpu_1")
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
    return config


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
                            "jax": jax.__version__, "jaxlib": _version("jaxlib"), "flax": _version("flax")}
    try:
        from jax._src.lib import cuda_versions  # private; present on CUDA builds only
        info["jax_cudnn"] = cuda_versions.cudnn_get_version() if cuda_versions else None
    except Exception:  # noqa: BLE001  (best effort: a version number for the record)
        pass
    workdir = tempfile.mkdtemp(prefix="train_mfu_ours_")
    trainer = None
    try:
        config = make_config(spec, platform_name)
        if registries_complete:
            validate(config, num_devices=jax.device_count())
        info["validated"] = registries_complete
        info["compile_cache"] = spec.get("compile_cache") or None
        trainer = Trainer(config, workdir)
        info["attention"] = trainer.attention
        info["mesh"] = dict(trainer.mesh.shape)
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
        stats = device.memory_stats() or {}
        info["peak_mem_bytes"] = stats.get("peak_bytes_in_use")
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


def run_torch(spec: dict) -> dict:
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import AutoModelForCausalLM, Qwen2Config

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    info: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if cuda else (platform.processor() or "cpu"),
                            "platform": "gpu" if cuda else "cpu", "torch": torch.__version__,
                            "transformers": transformers.__version__,
                            "torch_cuda": torch.version.cuda,
                            "torch_cudnn": torch.backends.cudnn.version() if cuda else None}
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    m = model_fields(spec["shape"])
    hf_config = Qwen2Config(
        vocab_size=m["vocab_size"], hidden_size=m["d_model"], intermediate_size=m["d_ff"],
        num_hidden_layers=m["n_layers"], num_attention_heads=m["n_heads"], num_key_value_heads=m["n_kv_heads"],
        max_position_embeddings=spec["seq"], tie_word_embeddings=True, use_cache=False, rms_norm_eps=1e-6)
    k = spec["micro_batches"]
    try:
        model = AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa", dtype=torch.float32)
        info["attention"] = model.config._attn_implementation
        info["params"] = int(sum(p.numel() for p in model.parameters()))
        model.to(dev).train()
        if spec.get("peer_grad_ckpt"):
            model.gradient_checkpointing_enable()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                                      **({"fused": True} if cuda else {}))
        forward = torch.compile(model) if spec["impl"] == "compile" else model
        batch = synthetic_batch(m["vocab_size"], spec["batch"], spec["seq"])
        inputs = torch.from_numpy(batch["inputs"]).long().to(dev).chunk(k)
        targets = torch.from_numpy(batch["targets"]).long().to(dev).chunk(k)

        def train_step():
            for x, y in zip(inputs, targets):  # gradient accumulation when micro_batches > 1
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=cuda):
                    logits = forward(input_ids=x).logits
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1)) / k
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, CLIP)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss * k

        sync = torch.cuda.synchronize if cuda else (lambda: None)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        loss = train_step()
        sync()
        info["first_step_s"] = time.perf_counter() - start
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


def add_derived(result: dict, shape: str, seq: int, measured_peak: float) -> dict:
    """MaxText-convention MFU (primary), PaLM-convention MFU and MFU against the measured matmul peak."""
    from shared.metrics.flops import (mfu, peak_flops_per_device, training_flops_per_token,
                                      training_flops_per_token_palm)

    model_cfg = flops_model_config(shape)
    result["flops_per_token"] = training_flops_per_token(model_cfg, seq)
    result["flops_per_token_palm"] = training_flops_per_token_palm(model_cfg, seq)
    peak = peak_flops_per_device(result.get("device", ""))
    result["peak_flops"] = peak
    if result.get("status") == "ok":
        tok_s = result["tokens_per_s"]
        result["mfu"] = mfu(tok_s, result["flops_per_token"], peak)
        result["mfu_palm"] = mfu(tok_s, result["flops_per_token_palm"], peak)
        result["mfu_measured_peak"] = mfu(tok_s, result["flops_per_token"], measured_peak) if peak else None
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


def cell(result: dict | None, key: str) -> str:
    if result is None:
        return "-"
    if result.get("status") != "ok":
        return result.get("status", "?")
    return fmt_tok(result.get("tokens_per_s")) if key == "tok" else fmt_pct(result.get("mfu"))


def ratio(a: dict | None, b: dict | None) -> str:
    if not a or not b or a.get("status") != "ok" or b.get("status") != "ok":
        return "-"
    return f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}x"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def summary_table(results: dict) -> str:
    header = ["shape", "ours tok/s", "ours MFU", "eager tok/s", "eager MFU", "compile tok/s", "compile MFU",
              "ours/eager", "ours/compile"]
    rows = []
    for shape, by_impl in results.items():
        ours, eager, comp = by_impl.get("ours"), by_impl.get("eager"), by_impl.get("compile")
        rows.append([shape, cell(ours, "tok"), cell(ours, "mfu"), cell(eager, "tok"), cell(eager, "mfu"),
                     cell(comp, "tok"), cell(comp, "mfu"), ratio(ours, eager), ratio(ours, comp)])
    return markdown_table(header, rows)


def detail_rows(entries: list[tuple[list[str], dict]]) -> list[list[str]]:
    rows = []
    for label, r in entries:
        ok = r.get("status") == "ok"
        mem = r.get("peak_mem_bytes")
        rows.append(label + [
            r.get("status", "?"),
            f"{1e3 * r['step_s']:.1f}" if ok else "-",
            fmt_tok(r.get("tokens_per_s")) if ok else "-",
            fmt_pct(r.get("mfu")) if ok else "-",
            fmt_pct(r.get("mfu_palm")) if ok else "-",
            f"{mem / 2**30:.1f}" if ok and mem else "-",
            f"{r['first_step_s']:.1f}" if "first_step_s" in r else "-",
            f"{r['params'] / 1e6:.2f}" if r.get("params") else "-",
            f"{r['loss']:.3f}" if ok else (r.get("error") or "")[:120].replace("|", "/"),
        ])
    return rows


DETAIL_COLUMNS = ["status", "step ms", "tok/s", "MFU", "MFU (PaLM)", "peak GiB", "first step s", "params M",
                  "loss / error"]


def hardware_record(results: list[dict]) -> dict:
    record: dict[str, Any] = {"host": platform.node(), "python": platform.python_version(),
                              "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}  # per-worker env: results[*].env
    for key in ("device", "platform", "jax", "jaxlib", "flax", "jax_cudnn", "torch", "transformers", "torch_cuda",
                "torch_cudnn"):
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


def render_markdown(payload: dict) -> str:
    hw = payload["hardware"]
    args = payload["args"]
    lines = ["# Training-step throughput and MFU (`python -m bench.train_mfu`)", "",
             f"Device: {hw.get('device', '?')}; jax {hw.get('jax', '?')} (jaxlib {hw.get('jaxlib', '?')}); "
             f"torch {hw.get('torch', '-')}, transformers {hw.get('transformers', '-')}; "
             f"XLA_FLAGS={hw.get('XLA_FLAGS') or '(none)'}", "",
             "Settings: " + ("" if args["sweep_ours"] else
                             f"remat={args['remat']}, micro_batches={args['micro_batches']}, ") +
             f"attention={args['attention']}, "
             f"{args['steps']} steps x {args['windows']} windows after {args['warmup']} warm-up steps, "
             f"rounds={args['rounds']}. MFU: MaxText formula vs the vendor bf16 peak.", ""]
    if payload.get("results"):
        lines += [summary_table(payload["results"]), "", "Details:", ""]
        entries = []
        for shape, by_impl in payload["results"].items():
            for impl, r in by_impl.items():
                entries.append(([shape, impl, f"{r.get('batch', '')}x{r.get('seq', '')}"], r))
        lines.append(markdown_table(["shape", "impl", "batch x seq"] + DETAIL_COLUMNS, detail_rows(entries)))
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
    p.add_argument("--batch", type=int, default=None, help=f"global sequences per step (default {DEFAULT_BATCH})")
    p.add_argument("--seq", type=int, default=None, help=f"sequence length (default {DEFAULT_SEQ})")
    p.add_argument("--remat", default="none", help="ours: model.remat = none | full | dots | dots_all")
    p.add_argument("--micro_batches", type=int, default=1, help="gradient accumulation steps (both sides)")
    p.add_argument("--attention", default="auto", help="ours: model.attention = auto | cudnn | xla")
    p.add_argument("--mesh", default="", help="ours: mesh preset (default gpu_1 on GPU, cpu_1 on CPU)")
    p.add_argument("--peers", default="eager,compile", help="comma list of: eager, compile ('' = none)")
    p.add_argument("--peer_grad_ckpt", action="store_true", help="peer: HF gradient checkpointing on")
    p.add_argument("--ours_only", action="store_true", help="skip the PyTorch peers")
    p.add_argument("--sweep_ours", action="store_true",
                   help="instead of the side-by-side: sweep (remat, micro_batches, batch) for ours on the first shape")
    p.add_argument("--sweep_remat", default="none,dots,full")
    p.add_argument("--sweep_micro_batches", default="1")
    p.add_argument("--sweep_batch", default="16,32")
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
    return args


def csv_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def base_spec(args, shape: str) -> dict:
    defaults = SHAPE_DEFAULTS.get(shape, {})
    return {"shape": shape, "seq": args.seq or defaults.get("seq", DEFAULT_SEQ),
            "batch": args.batch or defaults.get("batch", DEFAULT_BATCH), "micro_batches": args.micro_batches,
            "remat": args.remat, "attention": args.attention, "mesh": args.mesh, "steps": args.steps,
            "windows": args.windows, "warmup": args.warmup, "compile_cache": args.compile_cache,
            "peer_grad_ckpt": args.peer_grad_ckpt}


def check_spec(spec: dict) -> str | None:
    if spec["batch"] % spec["micro_batches"]:
        return f"batch {spec['batch']} is not divisible by micro_batches {spec['micro_batches']}"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._worker:
        return worker_main(args._worker, args._spec)

    shapes = csv_list(args.shapes)
    for shape in shapes:
        model_fields(shape)
    peers = [] if args.ours_only or args.sweep_ours else csv_list(args.peers)
    for peer in peers:
        if peer not in PEER_MODES:
            raise SystemExit(f"--peers: unknown mode {peer!r} (known: {', '.join(PEER_MODES)})")
    log_dir = args.log_dir or (os.path.splitext(args.out)[0] + "_logs" if args.out
                               else tempfile.mkdtemp(prefix="train_mfu_logs_"))
    runner = Runner(log_dir, args.worker_timeout_s, args.time_budget_s)
    measured_peak = args.measured_peak_tflops * 1e12
    payload: dict[str, Any] = {"args": vars(args) | {"peers": peers}, "hardware": {}, "results": {}, "sweep": None}
    all_results: list[dict] = []

    def record(result: dict, spec: dict, label: str) -> dict:
        peer_remat = "hf_grad_ckpt" if spec["peer_grad_ckpt"] else "none"
        result.update(shape=spec["shape"], batch=spec["batch"], seq=spec["seq"], micro_batches=spec["micro_batches"],
                      remat=spec["remat"] if label == "ours" else peer_remat)
        add_derived(result, spec["shape"], spec["seq"], measured_peak)
        all_results.append(result)
        brief = {k: result.get(k) for k in ("shape", "status", "batch", "seq", "micro_batches", "remat",
                                             "tokens_per_s", "step_s", "mfu", "peak_mem_bytes", "error")}
        print(f"[result] {label} " + json.dumps(brief, default=str), flush=True)
        payload["hardware"] = hardware_record(all_results)
        write_outputs(args.out, payload, render_markdown(payload))
        return result

    if args.sweep_ours:
        shape = shapes[0]
        points = []
        for remat in csv_list(args.sweep_remat):
            for micro in [int(x) for x in csv_list(args.sweep_micro_batches)]:
                for batch in [int(x) for x in csv_list(args.sweep_batch)]:
                    spec = dict(base_spec(args, shape), remat=remat, micro_batches=micro, batch=batch)
                    problem = check_spec(spec)
                    name = f"sweep_{shape}_remat-{remat}_mb{micro}_b{batch}"
                    result = ({"status": "skipped", "error": problem} if problem
                              else runner.run("ours", spec, name))
                    points.append({"remat": remat, "micro_batches": micro, "batch": batch,
                                   "result": record(result, spec, "ours")})
                    ok = [p for p in points if p["result"].get("status") == "ok"]
                    best = max(ok, key=lambda p: p["result"]["tokens_per_s"]) if ok else None
                    payload["sweep"] = {"shape": shape, "seq": spec["seq"], "points": points, "best": best}
    else:
        for shape in shapes:
            spec = base_spec(args, shape)
            problem = check_spec(spec)
            impls = ["ours"] + peers
            runs: dict[str, list[dict]] = {impl: [] for impl in impls}
            for round_index in range(args.rounds):
                for impl in impls:  # interleaved: ours, eager, compile, ours, eager, compile, ...
                    name = f"{shape}_{impl}" + (f"_r{round_index}" if args.rounds > 1 else "")
                    result = ({"status": "skipped", "error": problem} if problem
                              else runner.run(impl, spec, name))
                    runs[impl].append(record(result, spec, impl))
                    payload["results"][shape] = {i: pick_median(r) for i, r in runs.items() if r}
                    write_outputs(args.out, payload, render_markdown(payload))

    markdown = render_markdown(payload)
    print()
    print(markdown)
    write_outputs(args.out, payload, markdown)
    if args.out:
        print(f"\n[train_mfu] wrote {args.out} and {os.path.splitext(args.out)[0]}.md; logs in {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
