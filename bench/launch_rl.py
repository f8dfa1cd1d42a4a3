"""The RL step where users run it: a config through `python -m shared.launch`, its logged step times (issue 38).

    python -m bench.launch_rl --out=$OUT/launch_grpo_qwen0.5b.json [--steps=12] \
        [--reference=$OUT/grpo_h100_qwen0.5b.json] [--config.KEY=VALUE ...]

Runs the shipped config (default `experiments/rl/grpo_qwen_gsm8k.py:0.5b`, random init: no `train.init_from`, the
byte tokenizer, GSM8K prompts from ../shared/data/gsm8k, everything else as shipped) through the launcher for
`--steps` RL steps in a fresh workdir, as one subprocess, and reads the workdir's metrics.jsonl: per step
perf/step_s and its parts (perf/rollout_s, perf/reward_s, perf/logprob_s, perf/update_s), the programs compiled
during the step (perf/compiles) and its prompt bucket; the compile-ahead before step 1 (perf/compile_ahead_*); the
launcher's last line (programs compiled, persistent-cache hits). The JSON holds the first 10 steps, the steady
state (median step time over the steps after the first), the largest step after the first over that median
(issue 38's target: <= 1.5) and, given `--reference` (a `bench.decode --grpo` JSON of the same shape on the same
card), the steady state over the bench row's step (target <= 1.2). A markdown table goes next to the JSON.

The bench row, on the same card, for `--reference`:

    python -m bench.decode --grpo --skip_decode --grpo_shape=qwen0.5b --grpo_prompts=64 --grpo_group=8 \
        --grpo_new_tokens=512 --grpo_prompt_len=256 --grpo_steps=3 --grpo_remat=full --out=$OUT/grpo_h100_qwen0.5b.json

CPU plumbing check (tests/test_bench_launch_rl.py): `python -m bench.launch_rl
--config=experiments/rl/grpo_qwen_gsm8k.py:smoke --mesh=cpu_1 --steps=11 --out=/tmp/launch_rl.json`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_CONFIG = "experiments/rl/grpo_qwen_gsm8k.py:0.5b"
# what the measurement ran: random init with the byte tokenizer (no HF weights or tokenizer offline)
DEFAULT_OVERRIDES = ("--config.data.tokenizer=byte",)
STEP_KEYS = ("perf/step_s", "perf/rollout_and_reward_s", "perf/rollout_s", "perf/reward_s", "perf/logprob_s",
             "perf/update_s", "perf/compiles", "perf/prompt_bucket", "rl/response_length")
START_KEYS = ("perf/compile_ahead_s", "perf/compile_ahead_compiles", "perf/compile_ahead_cache_hits")
LAUNCH_LINE = re.compile(r"\[launch\] (\d+) programs compiled \((?:(\d+) from the persistent cache|persistent cache off)")
FIRST = 10


def read_rows(workdir: str) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def summarize(rows: list[dict], first: int = FIRST) -> dict:
    """Per-step times of a run's metrics rows, the first `first` steps, the steady state (median step time after
    the first step) and the largest step after the first over it."""
    steps = [{"step": int(r["step"]), **{k: r[k] for k in STEP_KEYS if k in r}} for r in rows if "perf/step_s" in r]
    if len(steps) < 2:
        raise ValueError(f"{len(steps)} logged RL step(s): at least 2 are needed for a steady state")
    start = {}
    for row in rows:
        start.update({k: row[k] for k in START_KEYS if k in row})
    after_first = [s["perf/step_s"] for s in steps[1:]]
    steady = statistics.median(after_first)
    return {"steps": steps, "first_steps_s": [s["perf/step_s"] for s in steps[:first]],
            "first_step_s": steps[0]["perf/step_s"], "steady_state_s": steady,
            "max_after_first_over_median": max(after_first) / steady,
            "compiles_after_first": sum(s.get("perf/compiles", 0) for s in steps[1:]),
            "prompt_buckets": sorted({s["perf/prompt_bucket"] for s in steps if "perf/prompt_bucket" in s}),
            **start}


def reference_step_s(path: str) -> float:
    """perf/step_s of a bench.decode --grpo JSON (its ours row)."""
    with open(path, encoding="utf-8") as fh:
        payload = json.load(fh)
    for entry in payload.get("grpo", []):
        if entry.get("impl", "ours") == "ours" and entry.get("perf/step_s"):
            return float(entry["perf/step_s"])
    raise ValueError(f"--reference={path}: no GRPO row with perf/step_s (a bench.decode --grpo JSON)")


def render_markdown(payload: dict) -> str:
    s = payload["summary"]
    lines = [f"Launcher RL step: `{payload['command']}` ({payload['steps']} steps), {payload.get('device', '?')}",
             "", "| step | step s | rollout s | reward s | log-probs s | update s | compiles | prompt bucket |",
             "|---|---|---|---|---|---|---|---|"]
    def cell(key):
        value = step.get(key)
        if value is None:
            return ""
        return f"{value:.3f}" if key.endswith("_s") else f"{value:g}"   # seconds; counts and buckets

    for step in s["steps"][:FIRST]:
        lines.append("| " + " | ".join(cell(k) for k in (
            "step", "perf/step_s", "perf/rollout_s", "perf/reward_s", "perf/logprob_s", "perf/update_s",
            "perf/compiles", "perf/prompt_bucket")) + " |")
    lines += ["", f"steady state (median after step 1): **{s['steady_state_s']:.3f} s**; largest step after the first "
              f"/ median: {s['max_after_first_over_median']:.2f} (target <= 1.5); programs compiled after step 1: "
              f"{s['compiles_after_first']:g}; compile ahead: {s.get('perf/compile_ahead_s', 0):.1f} s"]
    if payload.get("reference_step_s"):
        lines.append(f"bench row (`bench.decode --grpo`): {payload['reference_step_s']:.3f} s; steady state / bench "
                     f"row: {payload['steady_over_reference']:.2f} (target <= 1.2)")
    return "\n".join(lines) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=DEFAULT_CONFIG)
    p.add_argument("--steps", type=int, default=12, help="RL steps to run (train.steps)")
    p.add_argument("--mesh", default="", help="--mesh of the launch ('' = the config's preset)")
    p.add_argument("--compile_cache", default="auto", help="the launch's --compile_cache (auto, off or a folder)")
    p.add_argument("--workdir", default="", help="the run's workdir ('' = a temporary folder, removed after)")
    p.add_argument("--reference", default="", help="a bench.decode --grpo JSON to set the steady state against")
    p.add_argument("--out", required=True, help="JSON output (markdown next to it)")
    p.add_argument("--timeout_s", type=float, default=3000)
    known, rest = p.parse_known_args(argv)
    unknown = [a for a in rest if not a.startswith("--config.")]
    if unknown:
        p.error(f"unrecognized arguments: {' '.join(unknown)}")
    return known, rest


def main(argv=None) -> int:
    args, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_launch_rl_")
    if not args.workdir:
        os.rmdir(workdir)          # the launcher makes it (a fresh run)
    command = [sys.executable, "-m", "shared.launch", f"--config={args.config}", f"--workdir={workdir}",
               f"--config.train.steps={args.steps}", f"--compile_cache={args.compile_cache}",
               *([f"--mesh={args.mesh}"] if args.mesh else []), *DEFAULT_OVERRIDES, *overrides]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=args.timeout_s)
    wall = time.perf_counter() - start
    log = done.stdout + done.stderr
    with open(os.path.splitext(args.out)[0] + ".log", "w", encoding="utf-8") as fh:
        fh.write(log)
    if done.returncode != 0:
        print(log[-4000:], file=sys.stderr)
        print(f"error: the launch exited {done.returncode} (log next to --out)", file=sys.stderr)
        return 1
    payload = {"command": " ".join(["python", *command[1:]]), "steps": args.steps, "launch_wall_s": wall,
               "summary": summarize(read_rows(workdir))}
    launched = LAUNCH_LINE.search(log)
    if launched:
        payload["launch_compiles"] = int(launched.group(1))
        payload["launch_cache_hits"] = int(launched.group(2) or 0)
    summary_path = os.path.join(workdir, "summary.json")
    if os.path.exists(summary_path):
        with open(summary_path, encoding="utf-8") as fh:
            final = json.load(fh)
        payload.update(device=final.get("device_kind"), num_devices=final.get("num_devices"))
    if args.reference:
        payload["reference_step_s"] = reference_step_s(args.reference)
        payload["steady_over_reference"] = payload["summary"]["steady_state_s"] / payload["reference_step_s"]
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=1)
    markdown = render_markdown(payload)
    with open(os.path.splitext(args.out)[0] + ".md", "w", encoding="utf-8") as fh:
        fh.write(markdown)
    print(markdown)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
