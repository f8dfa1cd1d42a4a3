"""Where a training step's GPU time goes: profile a few steps of our trainer and list the top XLA ops.

    python -m bench.profile_step --shape=qwen0.5b --remat=dots --micro_batches=2 --batch=16 [--out=DIR]

Runs warm-up steps, then traces `--steps` steps with jax.profiler (perfetto trace), and prints GPU time per
op name (summed over the traced steps, divided by the step count) with its share of the step.
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import tempfile
import time

from bench.train_mfu import make_config, synthetic_batch


def gpu_op_times(trace_dir: str) -> dict[str, float]:
    paths = glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True)
    if not paths:
        raise FileNotFoundError(f"no perfetto trace under {trace_dir}")
    with gzip.open(paths[0]) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    gpu_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                and "/device:GPU" in str(e.get("args", {}).get("name", ""))}
    totals: dict[str, float] = collections.defaultdict(float)
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in gpu_pids:
            totals[e.get("name", "?")] += float(e.get("dur", 0.0))  # microseconds
    return totals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="qwen0.5b")
    parser.add_argument("--remat", default="dots")
    parser.add_argument("--micro_batches", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    import jax

    import shared.builtin  # noqa: F401
    from shared import sharding as sh
    from shared.train import Trainer

    spec = dict(shape=args.shape, remat=args.remat, attention="auto", seq=args.seq, mesh="", batch=args.batch,
                micro_batches=args.micro_batches)
    config = make_config(spec, jax.default_backend())
    workdir = tempfile.mkdtemp()
    trainer = Trainer(config, workdir)
    batch = trainer.to_global(synthetic_batch(config.model.vocab_size, args.batch, args.seq))
    with sh.use_mesh(trainer.mesh, trainer.rules):
        state = trainer.state
        for _ in range(3):
            state, _ = trainer._train_step(state, batch)
        jax.block_until_ready(state)
        start = time.perf_counter()
        for _ in range(args.steps):
            state, _ = trainer._train_step(state, batch)
        jax.block_until_ready(state)
        step_ms = (time.perf_counter() - start) / args.steps * 1e3
        trace_dir = args.out or tempfile.mkdtemp()
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(args.steps):
                state, _ = trainer._train_step(state, batch)
            jax.block_until_ready(state)
    totals = gpu_op_times(trace_dir)
    busy = sum(totals.values()) / args.steps / 1e3
    print(f"{args.shape} remat={args.remat} micro_batches={args.micro_batches} batch={args.batch}: "
          f"step {step_ms:.1f} ms (untraced), GPU busy {busy:.1f} ms/step")
    print(f"{'ms/step':>8} {'share':>6}  op")
    for name, us in sorted(totals.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{us / args.steps / 1e3:8.2f} {us / args.steps / 1e3 / step_ms:6.1%}  {name[:110]}")


if __name__ == "__main__":
    main()
