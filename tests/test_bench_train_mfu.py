"""bench/train_mfu.py on CPU: MFU over every device of a sharded step (8 fake CPU devices, a fake peak), the peers'
per-device batch, the OOM fallback to the largest batch every side fits, and the GPU-only peers skipped on CPU."""
import json
import os
import subprocess
import sys

import pytest

from bench import train_mfu as tm
from conftest import REPO_ROOT
from shared.metrics.flops import training_flops_per_token


def test_peer_names():
    assert tm.peer_kind("eager") == {"base": "eager", "compile": False, "liger": False, "params": "fp32"}
    assert tm.peer_kind("liger_compile_bf16") == {"base": "liger_compile", "compile": True, "liger": True,
                                                  "params": "bf16"}
    assert len(tm.PEER_MODES) == 8 and all(tm.peer_kind(p) for p in tm.PEER_MODES)
    with pytest.raises(ValueError, match="unknown peer"):
        tm.peer_kind("inductor")
    assert tm.parse_args(["--peers=all"]).peers == list(tm.PEER_MODES)
    with pytest.raises(SystemExit):
        tm.parse_args(["--peers=eager,nope"])


def test_the_bench_knows_the_configs_mode_values():
    """The bench copies model.remat's and model.tokamax_implementation's values (its peers import no jax): a value
    added to the config check must reach the bench's flags too; every bench attention is one the config accepts."""
    from shared.config.validate import ATTENTIONS, REMAT_MODES, TOKAMAX_IMPLEMENTATIONS

    assert tm.REMATS == REMAT_MODES
    assert tm.TOKAMAX_IMPLEMENTATIONS == TOKAMAX_IMPLEMENTATIONS
    assert set(tm.ATTENTIONS) <= set(ATTENTIONS)
    spec = tm.base_spec(tm.parse_args(["--attention=tokamax", "--tokamax_implementation=triton"]), "tiny")
    config = tm.make_config(spec, "cpu")
    assert (config.model.attention, config.model.tokamax_implementation) == ("tokamax", "triton")


def test_mfu_divides_by_devices_times_the_per_device_peak():
    flops = training_flops_per_token(tm.flops_model_config("125m"), 2048)
    result = {"status": "ok", "device": "NVIDIA H100 80GB HBM3", "devices": 4, "tokens_per_s": 4 * 300e3}
    tm.add_derived(result, "125m", 2048, 810e12)
    assert result["peak_flops"] == 989e12
    assert result["tokens_per_s_per_device"] == 300e3
    assert result["mfu"] == pytest.approx(4 * 300e3 * flops / (4 * 989e12))
    assert result["mfu_per_device"] == pytest.approx(result["mfu"])
    assert result["mfu"] < 0.3  # one device's peak under a 4-device step would have given 4x this
    fake = {"status": "ok", "device": "cpu", "devices": 8, "tokens_per_s": 8e3}
    tm.add_derived(fake, "tiny", 128, 810e12, peak_override=1e9)
    assert fake["mfu"] == pytest.approx(8e3 * training_flops_per_token(tm.flops_model_config("tiny"), 128) / 8e9)
    assert tm.add_derived({"status": "ok", "device": "cpu", "tokens_per_s": 1.0}, "tiny", 128, 1.0)["mfu"] is None


class FakeRunner:
    """Stands in for the subprocesses: ours on `devices` devices; `oom_above[impl]` = the largest batch (per device)
    that impl fits."""
    calls: list = []

    def __init__(self, *args, devices=2, oom_above=None, **kwargs):
        self.devices, self.oom_above = devices, oom_above or {}

    def run(self, kind, spec, name):
        ours = kind == "ours"
        devices = self.devices if ours else 1
        batch = spec["batch_per_device"] * devices if ours and spec.get("batch_per_device") else spec["batch"]
        FakeRunner.calls.append((kind, batch, name))
        result = {"device": "NVIDIA H100 80GB HBM3", "devices": devices, "batch": batch,
                  "params_dtype": "ours" if ours else tm.peer_kind(kind)["params"]}
        if batch / devices > self.oom_above.get(kind, 1 << 30):
            return dict(result, status="OOM", error="CUDA out of memory")
        speed = {"ours": 3.0, "compile": 2.0, "compile_bf16": 2.5}.get(kind, 1.0)  # tokens/s per device, scaled
        return dict(result, status="ok", tokens_per_s=speed * 1e5 * devices, step_s=0.1, first_step_s=1.0, loss=11.0)


def run_main(monkeypatch, tmp_path, argv, **runner):
    FakeRunner.calls = []
    monkeypatch.setattr(tm, "Runner", lambda *a, **k: FakeRunner(*a, **k, **runner))
    out = tmp_path / "r.json"
    assert tm.main(argv + [f"--out={out}"]) == 0
    return json.loads(out.read_text()), (tmp_path / "r.md").read_text()


def test_peers_run_at_ours_per_device_batch(monkeypatch, tmp_path):
    payload, md = run_main(monkeypatch, tmp_path, ["--shapes=125m", "--batch_per_device=8", "--peers=eager,compile"],
                           devices=4)
    assert [(k, b) for k, b, _ in FakeRunner.calls] == [("ours", 32), ("eager", 8), ("compile", 8)]
    res = payload["results"]["125m"]
    assert res["ours"]["devices"] == 4 and res["ours"]["tokens_per_s_per_device"] == pytest.approx(3e5)
    assert payload["headline"]["125m"]["peer"] == "compile"
    assert payload["headline"]["125m"]["ours_over_peer"] == pytest.approx(1.5)  # per device: 3e5 / 2e5
    assert "| 125m | 8x2048 | 4 | 300.0k |" in md
    payload, _ = run_main(monkeypatch, tmp_path, ["--shapes=125m", "--batch=32", "--peers=eager"], devices=4)
    assert [(k, b) for k, b, _ in FakeRunner.calls] == [("ours", 32), ("eager", 8)]


def test_oom_falls_back_to_the_largest_batch_every_side_fits(monkeypatch, tmp_path):
    payload, md = run_main(monkeypatch, tmp_path, ["--shapes=qwen0.5b", "--batch=16", "--peers=eager,compile,compile_bf16"],
                           devices=1, oom_above={"eager": 4, "compile": 8})
    assert payload["results"]["qwen0.5b"]["eager"]["status"] == "OOM"
    assert payload["results"]["qwen0.5b"]["ours"]["batch"] == 16
    note = payload["fallback"]["qwen0.5b"]
    assert note["from"] == 16 and note["to"] == 4 and note["tried"] == [8, 4]
    fallback = payload["results_fallback"]["qwen0.5b"]
    assert {impl: r["batch"] for impl, r in fallback.items()} == {"ours": 4, "eager": 4, "compile": 4,
                                                                   "compile_bf16": 4}
    assert all(r["status"] == "ok" and r["fallback_from"] == {"batch": 16} for r in fallback.values())
    assert payload["headline_fallback"]["qwen0.5b"]["peer"] == "compile"  # compile_bf16 is faster, not matched
    assert payload["headline_fallback"]["qwen0.5b"]["fastest_peer"] == "compile_bf16"
    assert "At the largest batch every side fits" in md and "batch 16 -> 4" in md
    # at each halving only the sides still OOM run (compile fits at 8, eager not); then every other side once, at
    # the batch where all fit (compile again: its result at 8 is not at an equal batch)
    assert [(k, b) for k, b, _ in FakeRunner.calls[4:]] == [("eager", 8), ("compile", 8), ("eager", 4),
                                                            ("ours", 4), ("compile", 4), ("compile_bf16", 4)]
    payload, _ = run_main(monkeypatch, tmp_path, ["--shapes=qwen0.5b", "--batch=16", "--peers=eager",
                                                  "--fallback_batch=2"], devices=1, oom_above={"eager": 4})
    assert payload["fallback"]["qwen0.5b"]["tried"] == [2] and payload["fallback"]["qwen0.5b"]["to"] == 2
    payload, _ = run_main(monkeypatch, tmp_path, ["--shapes=qwen0.5b", "--batch=16", "--peers=eager",
                                                  "--fallback=none"], devices=1, oom_above={"eager": 4})
    assert "results_fallback" not in payload


def test_cpu_plumbing_on_8_fake_devices(tmp_path):
    """The real workers: ours sharded over cpu_8 with a fake peak, the eager peer at ours' per-device batch, the
    GPU-only peers skipped with a reason."""
    out = tmp_path / "tiny.json"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    cmd = [sys.executable, "-m", "bench.train_mfu", "--shapes=tiny", "--steps=1", "--windows=1", "--warmup=0",
           "--mesh=cpu_8", "--batch=8", "--peak_tflops=0.01", "--peers=eager,compile,liger_compile",
           "--compile_cache=", f"--out={out}"]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())["results"]["tiny"]
    ours, eager = res["ours"], res["eager"]
    assert ours["status"] == "ok" and ours["devices"] == 8 and ours["mesh"] == {"data": 2, "fsdp": 2, "tensor": 2}
    flops = training_flops_per_token(tm.flops_model_config("tiny"), 128)
    assert ours["peak_flops"] == 1e10
    assert ours["mfu"] == pytest.approx(ours["tokens_per_s"] * flops / (8 * 1e10))
    assert ours["tokens_per_s_per_device"] == pytest.approx(ours["tokens_per_s"] / 8)
    assert eager["status"] == "ok" and eager["batch"] == 1 and eager["devices"] == 1
    for peer in ("compile", "liger_compile"):
        assert res[peer]["status"] == "skipped" and "GPU-only" in res[peer]["error"]
