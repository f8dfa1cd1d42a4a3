"""bench/launch_rl.py on a tiny CPU config (the GPU row is the shipped 0.5B config), and the launcher's persistent
compilation cache: a second launch of the same config reads its programs from the cache (jax's cache-hit events,
the cache folder's files) and logs the same losses."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT as ROOT  # noqa: E402

STEPS = 11


def bench_launch(tmp, name: str) -> dict:
    env = dict(os.environ, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")   # store every program, however quick
    out = tmp / f"{name}.json"
    subprocess.run([sys.executable, "-m", "bench.launch_rl", "--config=experiments/rl/grpo_qwen_gsm8k.py:smoke",
                    "--mesh=cpu_1", f"--steps={STEPS}", f"--compile_cache={tmp / 'cache'}", f"--workdir={tmp / name}",
                    f"--out={out}", "--config.train.checkpoint_every=100"],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
    return json.loads(out.read_text())


def logged(workdir, key: str) -> list[float]:
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [r[key] for r in rows if "perf/step_s" in r]


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launch_rl")
    payload = bench_launch(tmp, "first")
    return tmp, payload, sorted(os.listdir(tmp / "cache"))


def test_bench_row_reports_the_first_steps_and_the_steady_state_of_the_logged_run(first):
    tmp, payload, _ = first
    summary = payload["summary"]
    step_s = logged(tmp / "first", "perf/step_s")
    assert [s["step"] for s in summary["steps"]] == list(range(1, STEPS + 1))
    assert summary["first_steps_s"] == step_s[:10]
    assert summary["steady_state_s"] == pytest.approx(float(np.median(step_s[1:])))
    assert summary["max_after_first_over_median"] == pytest.approx(max(step_s[1:]) / np.median(step_s[1:]))
    assert summary["compiles_after_first"] == 0 and summary["perf/compile_ahead_compiles"] > 0
    # a cold cache: nearly every program compiled (a program whose HLO repeats that of an earlier one is a hit)
    assert payload["launch_compiles"] > 0 and payload["launch_cache_hits"] <= payload["launch_compiles"] // 10
    assert "| 10 |" in (tmp / "first.md").read_text()


def test_second_launch_of_the_same_config_hits_the_persistent_compilation_cache(first):
    tmp, payload, files = first
    assert files, "the first launch stored no program in the cache folder"
    again = bench_launch(tmp, "second")
    assert again["launch_cache_hits"] > payload["launch_cache_hits"]
    # every program of the second launch came from the cache: it stored nothing new
    assert sorted(os.listdir(tmp / "cache")) == files
    assert again["launch_compiles"] == payload["launch_compiles"]
    assert logged(tmp / "second", "train/loss") == logged(tmp / "first", "train/loss")
